// Built-in tests of the Jinja interpreter (`x is defined`, `n is odd`,
// selectattr(..., 'equalto', ...)), with Jinja2's semantics: e.g. booleans
// are numbers but not integers, Undefined is iterable, strings and dicts
// are sequences. Dispatch is by name through a constant table.
#include <string_view>
#include <unordered_map>

#include "template/jinja_builtins.h"
#include "template/jinja_interp.h"
#include "template/jinja_text.h"

namespace rf::jinja {

namespace {

using TestFn = bool (*)(Renderer&, const Value&, const CallArgs&);

bool t_defined(Renderer&, const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Renderer&, const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(Renderer&, const Value& v, const CallArgs&) { return v.is_none(); }
bool t_boolean(Renderer&, const Value& v, const CallArgs&) { return v.kind == Kind::Bool; }
bool t_true(Renderer&, const Value& v, const CallArgs&) { return v.kind == Kind::Bool && v.b; }
bool t_false(Renderer&, const Value& v, const CallArgs&) { return v.kind == Kind::Bool && !v.b; }
bool t_string(Renderer&, const Value& v, const CallArgs&) { return v.is_string(); }
bool t_number(Renderer&, const Value& v, const CallArgs&) { return v.is_number(); }
bool t_integer(Renderer&, const Value& v, const CallArgs&) { return v.kind == Kind::Int; }
bool t_float(Renderer&, const Value& v, const CallArgs&) { return v.kind == Kind::Float; }
bool t_mapping(Renderer&, const Value& v, const CallArgs&) { return v.is_dict() && v.dict->kind == DictKind::Plain; }
bool t_iterable(Renderer&, const Value& v, const CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && v.dict->kind == DictKind::Plain);
}
bool t_sequence(Renderer&, const Value& v, const CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_plain_list() || (v.is_dict() && v.dict->kind == DictKind::Plain);
}
bool t_callable(Renderer&, const Value& v, const CallArgs&) { return v.kind == Kind::Func || v.is_undefined(); }
bool t_escaped(Renderer&, const Value&, const CallArgs&) { return false; }
bool t_lower(Renderer&, const Value& v, const CallArgs&) {
  return v.is_string() && py_lower(v.str()) == v.str() && py_upper(v.str()) != v.str();
}
bool t_upper(Renderer&, const Value& v, const CallArgs&) {
  return v.is_string() && py_upper(v.str()) == v.str() && py_lower(v.str()) != v.str();
}
// Python's value % divisor == remainder, for ints and floats alike.
bool mod_is(Renderer& r, const Value& v, const Value& divisor, int64_t remainder) {
  const Value m = r.binary_op(BinOp::Mod, v, divisor);
  return equals(m, Value::integer(remainder));
}
bool t_odd(Renderer& r, const Value& v, const CallArgs&) { return mod_is(r, v, Value::integer(2), 1); }
bool t_even(Renderer& r, const Value& v, const CallArgs&) { return mod_is(r, v, Value::integer(2), 0); }
bool t_divisibleby(Renderer& r, const Value& v, const CallArgs& a) { return mod_is(r, v, a.get(0, "num"), 0); }
bool t_eq(Renderer&, const Value& v, const CallArgs& a) { return equals(v, a.get(0, "other")); }
bool t_ne(Renderer&, const Value& v, const CallArgs& a) { return !equals(v, a.get(0, "other")); }
bool t_lt(Renderer& r, const Value& v, const CallArgs& a) { return r.compare(CmpOp::Lt, v, a.get(0, "other")); }
bool t_le(Renderer& r, const Value& v, const CallArgs& a) { return r.compare(CmpOp::Le, v, a.get(0, "other")); }
bool t_gt(Renderer& r, const Value& v, const CallArgs& a) { return r.compare(CmpOp::Gt, v, a.get(0, "other")); }
bool t_ge(Renderer& r, const Value& v, const CallArgs& a) { return r.compare(CmpOp::Ge, v, a.get(0, "other")); }
bool t_in(Renderer& r, const Value& v, const CallArgs& a) { return r.contains(a.get(0, "seq"), v); }
bool t_sameas(Renderer&, const Value& v, const CallArgs& a) {
  const Value o = a.get(0, "other");
  if (v.kind != o.kind) return false;
  switch (v.kind) {
    case Kind::List: return v.list == o.list;
    case Kind::Dict: return v.dict == o.dict;
    case Kind::Func: return v.fn == o.fn;
    case Kind::String: return v.s == o.s || v.str() == o.str();
    default: return equals(v, o);
  }
}
bool t_filter(Renderer&, const Value& v, const CallArgs&) { return v.is_string() && is_filter_name(v.str()); }
bool t_test(Renderer&, const Value& v, const CallArgs&) { return v.is_string() && is_test_name(v.str()); }

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
      {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"escaped", t_escaped}, {"even", t_even},
      {"false", t_false}, {"filter", t_filter}, {"float", t_float}, {"ge", t_ge}, {">=", t_ge},
      {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"in", t_in}, {"integer", t_integer},
      {"iterable", t_iterable}, {"le", t_le}, {"<=", t_le}, {"lower", t_lower}, {"lt", t_lt},
      {"lessthan", t_lt}, {"<", t_lt}, {"mapping", t_mapping}, {"ne", t_ne}, {"!=", t_ne}, {"none", t_none},
      {"number", t_number}, {"odd", t_odd}, {"sameas", t_sameas}, {"sequence", t_sequence},
      {"string", t_string}, {"test", t_test}, {"true", t_true}, {"undefined", t_undefined}, {"upper", t_upper},
  };
  return table;
}

}  // namespace

bool is_test_name(std::string_view name) { return test_table().count(name) != 0; }

bool apply_test(Renderer& r, std::string_view name, const Value& input, const CallArgs& args) {
  auto it = test_table().find(name);
  if (it == test_table().end()) runtime_error(str("no test named '", name, "'"));
  r.budget().charge(1);
  return it->second(r, input, args);
}

}  // namespace rf::jinja
