// Values, heap and Python-semantics helpers of the Jinja interpreter (see
// jinja_value.h).
#include "template/jinja_value.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/json_text.h"
#include "template/jinja_text.h"

namespace rf::jinja {

namespace {

std::string error_prefix(TemplateError::Kind kind, int line) {
  const std::string at = line > 0 ? str(" at line ", line) : std::string();
  switch (kind) {
    case TemplateError::Kind::Syntax: return "chat template syntax error" + at + ": ";
    case TemplateError::Kind::Raised: return "chat template raised an exception" + at + ": ";
    case TemplateError::Kind::Limit: return "chat template exceeded a limit" + at + ": ";
    case TemplateError::Kind::Runtime: break;
  }
  return "chat template error" + at + ": ";
}

[[noreturn]] void too_deep() {
  throw TemplateError(TemplateError::Kind::Limit, "value nested too deeply (or contains itself)");
}

void check_size(const std::string& out, size_t max_bytes) {
  if (out.size() > max_bytes)
    throw TemplateError(TemplateError::Kind::Limit, str("string longer than ", max_bytes, " bytes"));
}

}  // namespace

TemplateError::TemplateError(Kind kind, const std::string& message, int line)
    : rf::Error(error_prefix(kind, line) + message), kind_(kind), line_(line), message_(message) {}

void runtime_error(const std::string& message) { throw TemplateError(TemplateError::Kind::Runtime, message); }

void Budget::check_string_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    throw TemplateError(TemplateError::Kind::Limit,
                        str("string of ", bytes, " bytes exceeds the limit of ", limits_.max_output_bytes));
}

void Budget::exceeded() const {
  throw TemplateError(TemplateError::Kind::Limit,
                      str("rendering took more than ", limits_.max_steps, " steps (an endless or huge loop?)"));
}

// ---- DictObj ----

namespace {

// Python hashes 1, 1.0 and True alike; only those scalar keys are supported.
bool hashable(const Value& k) {
  return k.kind == Kind::String || k.kind == Kind::Int || k.kind == Kind::Float || k.kind == Kind::Bool ||
         k.kind == Kind::None;
}

}  // namespace

const Value* DictObj::find(std::string_view key) const {
  if (entries.size() <= kIndexFrom) {
    for (const auto& [k, v] : entries)
      if (k.kind == Kind::String && k.str() == key) return &v;
    return nullptr;
  }
  auto it = string_index_.find(key);
  return it == string_index_.end() ? nullptr : &entries[it->second].second;
}

const Value* DictObj::find(const Value& key) const {
  if (key.kind == Kind::String) return find(std::string_view(key.str()));
  if (!hashable(key)) return nullptr;
  for (const auto& [k, v] : entries)
    if (k.kind != Kind::String && equals(k, key)) return &v;
  return nullptr;
}

void DictObj::set(const Value& key, const Value& value) {
  if (!hashable(key)) runtime_error(str("unhashable type: '", type_name(key), "'"));
  if (auto* existing = const_cast<Value*>(find(key))) {
    *existing = value;
    return;
  }
  entries.emplace_back(key, value);
  if (entries.size() == kIndexFrom + 1) {  // large enough to index: index every string key
    for (size_t k = 0; k < entries.size(); ++k)
      if (entries[k].first.kind == Kind::String) string_index_.emplace(std::string_view(entries[k].first.str()), k);
  } else if (entries.size() > kIndexFrom + 1 && key.kind == Kind::String) {
    string_index_.emplace(std::string_view(key.str()), entries.size() - 1);
  }
}

// ---- Heap ----

Value Heap::make_string(std::string s) {
  budget_.check_string_size(s.size());
  budget_.charge(1 + s.size() / 8);
  strings_.push_back(std::move(s));
  return Value::string(&strings_.back());
}

ListObj* Heap::make_list(size_t reserve) {
  budget_.charge(1 + reserve);
  lists_.emplace_back();
  lists_.back().items.reserve(std::min<size_t>(reserve, 1u << 20));
  return &lists_.back();
}

Value Heap::make_tuple(std::vector<Value> items) {
  budget_.charge(1 + items.size());
  lists_.emplace_back();
  lists_.back().items = std::move(items);
  lists_.back().is_tuple = true;
  return Value::of(&lists_.back());
}

DictObj* Heap::make_dict(DictKind kind) {
  budget_.charge(4);
  dicts_.emplace_back();
  dicts_.back().kind = kind;
  return &dicts_.back();
}

FuncObj* Heap::make_func() {
  budget_.charge(1);
  funcs_.emplace_back();
  return &funcs_.back();
}

// ---- Python semantics ----

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.b;
    case Kind::Int: return v.i != 0;
    case Kind::Float: return v.f != 0.0;
    case Kind::String: return !v.s->empty();
    case Kind::List: return v.list->seq == SeqKind::Generator || !v.list->items.empty();
    case Kind::Dict: return v.dict->kind != DictKind::Plain || !v.dict->entries.empty();
    case Kind::Func: return true;
  }
  return false;
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List:
      switch (v.list->seq) {
        case SeqKind::Generator: return "generator";
        case SeqKind::ItemsView: return "dict_items";
        case SeqKind::KeysView: return "dict_keys";
        case SeqKind::ValuesView: return "dict_values";
        case SeqKind::List: break;
      }
      return v.list->is_tuple ? "tuple" : "list";
    case Kind::Dict:
      return v.dict->kind == DictKind::Namespace ? "Namespace" : v.dict->kind == DictKind::Loop ? "LoopContext" : "dict";
    case Kind::Func: return "function";
  }
  return "object";
}

namespace {

void append_scalar(std::string& out, const Value& v) {
  switch (v.kind) {
    case Kind::None: out += "None"; break;
    case Kind::Bool: out += v.b ? "True" : "False"; break;
    case Kind::Int: out += std::to_string(v.i); break;
    case Kind::Float: out += float_repr(v.f); break;
    default: break;
  }
}

void append_container(std::string& out, const Value& v, size_t max_bytes, int depth) {
  if (depth > kMaxValueDepth) too_deep();
  if (v.kind == Kind::List && v.list->seq == SeqKind::Generator) {
    out += "<generator object>";
    return;
  }
  if (v.kind == Kind::List && v.list->seq != SeqKind::List) {  // dict_items([...]) and friends
    ListObj plain;
    plain.items = v.list->items;
    out += type_name(v) + "(";
    Value shown;
    shown.kind = Kind::List;
    shown.list = &plain;
    append_container(out, shown, max_bytes, depth + 1);
    out += ')';
    return;
  }
  if (v.kind == Kind::List) {
    const auto& items = v.list->items;
    out += v.list->is_tuple ? '(' : '[';
    for (size_t k = 0; k < items.size(); ++k) {
      if (k) out += ", ";
      append_repr(out, items[k], max_bytes, depth + 1);
      check_size(out, max_bytes);
    }
    if (v.list->is_tuple && items.size() == 1) out += ',';
    out += v.list->is_tuple ? ')' : ']';
    return;
  }
  const DictObj& d = *v.dict;
  if (d.kind == DictKind::Loop) {
    const Value* index = d.find("index");
    const Value* length = d.find("length");
    out += str("<LoopContext ", index ? index->as_int() : 0, "/", length ? length->as_int() : 0, ">");
    return;
  }
  if (d.kind == DictKind::Namespace) out += "<Namespace ";
  out += '{';
  bool first = true;
  for (const auto& [k, val] : d.entries) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k, max_bytes, depth + 1);
    out += ": ";
    append_repr(out, val, max_bytes, depth + 1);
    check_size(out, max_bytes);
  }
  out += '}';
  if (d.kind == DictKind::Namespace) out += '>';
}

}  // namespace

void append_str(std::string& out, const Value& v, size_t max_bytes, int depth) {
  switch (v.kind) {
    case Kind::Undefined: return;
    case Kind::String: out += v.str(); break;
    case Kind::List:
    case Kind::Dict: append_container(out, v, max_bytes, depth); break;
    case Kind::Func: out += str("<function ", v.fn->name, ">"); break;
    default: append_scalar(out, v);
  }
  check_size(out, max_bytes);
}

void append_repr(std::string& out, const Value& v, size_t max_bytes, int depth) {
  switch (v.kind) {
    case Kind::Undefined: out += "Undefined"; break;
    case Kind::String: append_py_repr(out, v.str()); break;
    case Kind::List:
    case Kind::Dict: append_container(out, v, max_bytes, depth); break;
    case Kind::Func: out += str("<function ", v.fn->name, ">"); break;
    default: append_scalar(out, v);
  }
  check_size(out, max_bytes);
}

bool equals(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) too_deep();
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.str() == b.str();
    case Kind::List: {
      if (a.list == b.list) return true;
      if (a.list->seq == SeqKind::Generator || a.list->seq == SeqKind::ValuesView || a.list->seq != b.list->seq) return false;
      if (a.list->is_tuple != b.list->is_tuple || a.list->items.size() != b.list->items.size()) return false;
      for (size_t k = 0; k < a.list->items.size(); ++k)
        if (!equals(a.list->items[k], b.list->items[k], depth + 1)) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.dict == b.dict) return true;
      if (a.dict->kind != b.dict->kind || a.dict->kind != DictKind::Plain) return false;
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& [k, v] : a.dict->entries) {
        const Value* other = b.dict->find(k);
        if (!other || !equals(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Kind::Func: return a.fn == b.fn;
    default: return false;
  }
}

bool less_than(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) too_deep();
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.kind == Kind::String && b.kind == Kind::String) return a.str() < b.str();
  if (a.is_plain_list() && b.is_plain_list() && a.list->is_tuple == b.list->is_tuple) {
    const auto& x = a.list->items;
    const auto& y = b.list->items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!equals(x[k], y[k], depth + 1)) return less_than(x[k], y[k], depth + 1);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    runtime_error(u.s ? str("'", *u.s, "' is undefined") : std::string("undefined value in comparison"));
  }
  runtime_error(str("'<' not supported between instances of '", type_name(a), "' and '", type_name(b), "'"));
}

// ---- JSON ----

namespace {

void json_newline(std::string& out, const JsonStyle& style, int level, size_t max_bytes) {
  out += '\n';
  for (int k = 0; k < level; ++k) {
    out += style.indent_unit;
    check_size(out, max_bytes);
  }
}

std::string json_key(const Value& k) {
  switch (k.kind) {
    case Kind::String: return k.str();
    case Kind::Bool: return k.b ? "true" : "false";
    case Kind::None: return "null";
    case Kind::Int: return std::to_string(k.i);
    case Kind::Float: return float_repr(k.f);
    default: runtime_error(str("keys must be str, int, float, bool or None, not ", type_name(k)));
  }
}

}  // namespace

void append_json(std::string& out, const Value& v, const JsonStyle& style, size_t max_bytes, int depth) {
  if (depth > kMaxValueDepth) too_deep();
  switch (v.kind) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f < 0 ? "-Infinity" : "Infinity";
      else out += float_repr(v.f);
      return;
    case Kind::String: append_json_string(out, v.str(), JsonStringOptions::python(style.ensure_ascii)); check_size(out, max_bytes); return;
    case Kind::List: {
      if (v.list->seq != SeqKind::List) break;
      const auto& items = v.list->items;
      if (items.empty()) { out += "[]"; return; }
      out += '[';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += style.item_sep;
        if (style.indent) json_newline(out, style, depth + 1, max_bytes);
        append_json(out, items[k], style, max_bytes, depth + 1);
        check_size(out, max_bytes);
      }
      if (style.indent) json_newline(out, style, depth, max_bytes);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (v.dict->kind != DictKind::Plain) break;
      const auto& entries = v.dict->entries;
      if (entries.empty()) { out += "{}"; return; }
      std::vector<std::pair<std::string, const Value*>> items;
      items.reserve(entries.size());
      for (const auto& [k, val] : entries) items.emplace_back(json_key(k), &val);
      if (style.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += style.item_sep;
        if (style.indent) json_newline(out, style, depth + 1, max_bytes);
        append_json_string(out, items[k].first, JsonStringOptions::python(style.ensure_ascii));
        out += style.key_sep;
        append_json(out, *items[k].second, style, max_bytes, depth + 1);
        check_size(out, max_bytes);
      }
      if (style.indent) json_newline(out, style, depth, max_bytes);
      out += '}';
      return;
    }
    default: break;
  }
  runtime_error(str("Object of type ", type_name(v), " is not JSON serializable"));
}

template <typename Json>
Value from_json(const Json& j, Heap& heap, int depth) {
  if (depth > kMaxValueDepth) too_deep();
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case Json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Value::integer(int64_t(u));
      return Value::number(double(u));
    }
    case Json::value_t::number_float: return Value::number(j.template get<double>());
    case Json::value_t::string: return heap.make_string(j.template get<std::string>());
    case Json::value_t::array: {
      ListObj* list = heap.make_list(j.size());
      for (const auto& item : j) list->items.push_back(from_json(item, heap, depth + 1));
      return Value::of(list);
    }
    case Json::value_t::object: {
      DictObj* dict = heap.make_dict();
      heap.budget().charge(j.size());
      for (const auto& [key, item] : j.items()) dict->set(heap.make_string(key), from_json(item, heap, depth + 1));
      return Value::of(dict);
    }
    default: return Value::none();
  }
}

template Value from_json<nlohmann::json>(const nlohmann::json&, Heap&, int);
template Value from_json<nlohmann::ordered_json>(const nlohmann::ordered_json&, Heap&, int);

}  // namespace rf::jinja
