// Operators, attribute/item access, slicing and iteration of the Jinja
// interpreter, with Python's semantics (see jinja_interp.h).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "template/jinja_interp.h"
#include "template/jinja_text.h"

namespace rf::jinja {

namespace {

[[noreturn]] void undefined_error(const Value& v) {
  runtime_error(v.s ? str("'", *v.s, "' is undefined") : std::string("undefined value used"));
}

[[noreturn]] void bad_operands(const char* op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  runtime_error(str("unsupported operand type(s) for ", op, ": '", type_name(a), "' and '", type_name(b), "'"));
}

int64_t add_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) runtime_error("integer overflow");
  return r;
}
int64_t sub_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) runtime_error("integer overflow");
  return r;
}
int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) runtime_error("integer overflow");
  return r;
}

int64_t py_floordiv(int64_t a, int64_t b) {
  if (b == 0) runtime_error("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) runtime_error("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  if (b == 0) runtime_error("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

double py_fmod(double a, double b) {
  if (b == 0) runtime_error("float modulo");
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

// ---- attribute and item access ----

Value Renderer::get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::Undefined: undefined_error(obj);
    case Kind::Dict:
      if (obj.dict->kind == DictKind::Plain && has_method(obj, name)) break;
      if (const Value* v = obj.dict->find(std::string_view(name))) return *v;
      return Value::undefined(&name);
    case Kind::String:
    case Kind::List:
      if (has_method(obj, name)) break;
      return Value::undefined(&name);
    default: return Value::undefined(&name);
  }
  FuncObj* fn = heap_.make_func();
  fn->kind = FuncKind::Method;
  fn->self = obj;
  fn->name = name;
  return Value::of(fn);
}

Value Renderer::get_item(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Kind::Undefined: undefined_error(obj);
    case Kind::Dict:
      if (obj.dict->kind == DictKind::Plain) {
        if (const Value* v = obj.dict->find(key)) return *v;
        if (key.kind == Kind::String && has_method(obj, key.str())) return get_attr(obj, key.str());
        return Value::undefined(key.kind == Kind::String ? key.s : nullptr);
      }
      if (key.kind == Kind::String) return get_attr(obj, key.str());
      return Value::undefined();
    case Kind::List:
      if (obj.list->seq != SeqKind::List) return Value::undefined();  // generators and views are not subscriptable
      if (key.is_int()) {
        const auto n = static_cast<int64_t>(obj.list->items.size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined();
        return obj.list->items[static_cast<size_t>(i)];
      }
      if (key.kind == Kind::String) return get_attr(obj, key.str());
      return Value::undefined();
    case Kind::String: {
      if (key.kind == Kind::String) return get_attr(obj, key.str());
      if (!key.is_int()) return Value::undefined();
      const std::string& s = obj.str();
      int64_t i = key.as_int();
      if (is_ascii(s)) {
        const auto n = static_cast<int64_t>(s.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined();
        return make_string(std::string(1, s[static_cast<size_t>(i)]));
      }
      const std::vector<size_t> offs = utf8_offsets(s);
      const auto n = static_cast<int64_t>(offs.size()) - 1;
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined();
      return make_string(s.substr(offs[static_cast<size_t>(i)], offs[static_cast<size_t>(i) + 1] - offs[static_cast<size_t>(i)]));
    }
    default: return Value::undefined();
  }
}

Value Renderer::slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj);
  if (!obj.is_plain_list() && obj.kind != Kind::String)
    runtime_error(str("'", type_name(obj), "' object is not subscriptable"));
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (!v.is_int()) runtime_error(str("slice ", what, " must be an integer or none"));
    return v.as_int();
  };
  const int64_t step = as_index(step_v, "step").value_or(1);
  if (step == 0) runtime_error("slice step cannot be zero");
  std::vector<size_t> offs;
  int64_t n;
  if (obj.kind == Kind::List) {
    n = static_cast<int64_t>(obj.list->items.size());
  } else {
    offs = utf8_offsets(obj.str());
    n = static_cast<int64_t>(offs.size()) - 1;
  }
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t start = clamp(as_index(start_v, "start"), step < 0 ? n - 1 : 0);
  const int64_t stop = clamp(as_index(stop_v, "stop"), step < 0 ? -1 : n);
  std::vector<int64_t> picks;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picks.push_back(i);
  budget_.charge(picks.size());
  if (obj.kind == Kind::List) {
    ListObj* out = heap_.make_list(picks.size());
    out->is_tuple = obj.list->is_tuple;
    for (int64_t i : picks) out->items.push_back(obj.list->items[static_cast<size_t>(i)]);
    return Value::of(out);
  }
  std::string s;
  const std::string& src = obj.str();
  if (step == 1 && !picks.empty()) {
    s = src.substr(offs[static_cast<size_t>(picks.front())], offs[static_cast<size_t>(picks.back()) + 1] - offs[static_cast<size_t>(picks.front())]);
  } else {
    for (int64_t i : picks) s.append(src, offs[static_cast<size_t>(i)], offs[static_cast<size_t>(i) + 1] - offs[static_cast<size_t>(i)]);
  }
  return make_string(std::move(s));
}

std::vector<Value> Renderer::iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind) {
    case Kind::Undefined: return out;
    case Kind::List:
      out = v.list->items;
      if (v.list->seq == SeqKind::Generator) v.list->items.clear();  // a generator is consumed
      break;
    case Kind::Dict:
      if (v.dict->kind != DictKind::Plain) runtime_error(str("'", type_name(v), "' object is not iterable"));
      out.reserve(v.dict->entries.size());
      for (const auto& [k, val] : v.dict->entries) out.push_back(k);
      break;
    case Kind::String: {
      const std::string& s = v.str();
      out.reserve(s.size());
      for (size_t p = 0; p < s.size();) {
        const size_t start = p;
        utf8::next_escaped(s, p);
        out.push_back(make_string(s.substr(start, p - start)));
      }
      break;
    }
    default: runtime_error(str("'", type_name(v), "' object is not iterable"));
  }
  budget_.charge(out.size());
  return out;
}

// ---- operators ----

Value Renderer::binary_op(BinOp op, const Value& a, const Value& b) {
  const bool ints = a.is_int() && b.is_int();
  const bool nums = a.is_number() && b.is_number();
  switch (op) {
    case BinOp::Add: {
      if (ints) return Value::integer(add_checked(a.as_int(), b.as_int()));
      if (nums) return Value::number(a.as_double() + b.as_double());
      if (a.is_string() && b.is_string()) {
        budget_.check_string_size(a.str().size() + b.str().size());
        return make_string(a.str() + b.str());
      }
      if (a.is_plain_list() && b.is_plain_list() && a.list->is_tuple == b.list->is_tuple) {
        ListObj* out = heap_.make_list(a.list->items.size() + b.list->items.size());
        out->is_tuple = a.list->is_tuple;
        out->items = a.list->items;
        out->items.insert(out->items.end(), b.list->items.begin(), b.list->items.end());
        return Value::of(out);
      }
      bad_operands("+", a, b);
    }
    case BinOp::Sub: {
      if (ints) return Value::integer(sub_checked(a.as_int(), b.as_int()));
      if (nums) return Value::number(a.as_double() - b.as_double());
      bad_operands("-", a, b);
    }
    case BinOp::Mul: {
      if (ints) return Value::integer(mul_checked(a.as_int(), b.as_int()));
      if (nums) return Value::number(a.as_double() * b.as_double());
      const Value& seq = b.is_int() ? a : b;
      const Value& count = b.is_int() ? b : a;
      if (count.is_int() && (seq.is_string() || seq.is_plain_list())) {
        const int64_t times = std::max<int64_t>(0, count.as_int());
        if (seq.is_string()) {
          const size_t len = seq.str().size();
          if (len && static_cast<uint64_t>(times) > max_string() / len) budget_.check_string_size(max_string() + 1);
          std::string out;
          out.reserve(len * static_cast<size_t>(times));
          for (int64_t k = 0; k < times; ++k) out += seq.str();
          return make_string(std::move(out));
        }
        const size_t len = seq.list->items.size();
        if (len && static_cast<uint64_t>(times) > options_.limits.max_steps / len) budget_.charge(options_.limits.max_steps + 1);
        ListObj* out = heap_.make_list(len * static_cast<size_t>(times));
        out->is_tuple = seq.list->is_tuple;
        for (int64_t k = 0; k < times; ++k) out->items.insert(out->items.end(), seq.list->items.begin(), seq.list->items.end());
        return Value::of(out);
      }
      bad_operands("*", a, b);
    }
    case BinOp::Div:
      if (nums) {
        if (b.as_double() == 0) runtime_error("division by zero");
        return Value::number(a.as_double() / b.as_double());
      }
      bad_operands("/", a, b);
    case BinOp::FloorDiv:
      if (ints) return Value::integer(py_floordiv(a.as_int(), b.as_int()));
      if (nums) {
        if (b.as_double() == 0) runtime_error("float floor division by zero");
        return Value::number(std::floor(a.as_double() / b.as_double()));
      }
      bad_operands("//", a, b);
    case BinOp::Mod:
      if (ints) return Value::integer(py_mod(a.as_int(), b.as_int()));
      if (nums) return Value::number(py_fmod(a.as_double(), b.as_double()));
      if (a.is_string()) return percent_format(a.str(), b);
      bad_operands("%", a, b);
    case BinOp::Pow:
      if (ints && b.as_int() >= 0) {
        int64_t base = a.as_int(), exp = b.as_int(), result = 1;
        while (exp > 0) {
          if (exp & 1) result = mul_checked(result, base);
          exp >>= 1;
          if (exp) base = mul_checked(base, base);
        }
        return Value::integer(result);
      }
      if (nums) {
        if (a.as_double() == 0 && b.as_double() < 0) runtime_error("zero cannot be raised to a negative power");
        return Value::number(std::pow(a.as_double(), b.as_double()));
      }
      bad_operands("**", a, b);
  }
  return Value::undefined();
}

bool Renderer::contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::Undefined: return false;
    case Kind::String:
      if (!item.is_string())
        runtime_error(str("'in <string>' requires string as left operand, not ", type_name(item)));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
      for (const Value& v : container.list->items) {
        budget_.charge(1);
        if (equals(v, item)) return true;
      }
      return false;
    case Kind::Dict:
      if (container.dict->kind != DictKind::Plain) break;
      if (item.kind == Kind::List || item.kind == Kind::Dict) runtime_error(str("unhashable type: '", type_name(item), "'"));
      return container.dict->find(item) != nullptr;
    default: break;
  }
  runtime_error(str("argument of type '", type_name(container), "' is not iterable"));
}

bool Renderer::compare(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::Eq: return equals(a, b);
    case CmpOp::Ne: return !equals(a, b);
    case CmpOp::Lt: return less_than(a, b);
    case CmpOp::Gt: return less_than(b, a);
    case CmpOp::Le: return less_than(a, b) || equals(a, b);
    case CmpOp::Ge: return less_than(b, a) || equals(a, b);
    case CmpOp::In: return contains(b, a);
    case CmpOp::NotIn: return !contains(b, a);
  }
  return false;
}

}  // namespace rf::jinja
