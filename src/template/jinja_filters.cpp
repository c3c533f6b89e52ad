// Built-in filters of the Jinja interpreter over sequences and mappings
// (map, select/selectattr, sort, unique, join, dictsort, ...), with Jinja2's
// semantics, and the filter dispatch (string, number and JSON filters live
// in jinja_string_filters.cpp). Dispatch is by name through constant tables.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <unordered_map>

#include "template/jinja_builtins.h"
#include "template/jinja_interp.h"
#include "template/jinja_sort.h"
#include "template/jinja_text.h"

namespace rf::jinja {

namespace {


std::string as_text(Renderer& r, const Value& v) { return r.to_str(v); }


// Attribute path "a.b.0" as Jinja's make_attrgetter resolves it (item access per part).
Value get_path(Renderer& r, const Value& item, const Value& path) {
  if (!path.is_string()) return r.get_item(item, path);
  const std::string& p = path.str();
  if (p.find('.') == std::string::npos) return r.get_item(item, path);
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = p.find('.', start);
    const std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = digits && part.size() < 18 ? r.get_item(cur, Value::integer(std::stoll(part))) : r.get_item(cur, r.make_string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value sort_key(Renderer& r, const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return r.make_string(py_lower(v.str()));
  return v;
}

Value make_list(Renderer& r, std::vector<Value> items) {
  ListObj* l = r.heap().make_list(items.size());
  l->items = std::move(items);
  return Value::of(l);
}

// What Jinja2's lazy filters (map, select, batch, unique, ...) return.
Value make_generator(Renderer& r, std::vector<Value> items) {
  Value g = make_list(r, std::move(items));
  g.list->seq = SeqKind::Generator;
  return g;
}

size_t py_len(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return 0;
    case Kind::String: return utf8_length(v.str());
    case Kind::List:
      if (v.list->seq == SeqKind::Generator) break;
      return v.list->items.size();
    case Kind::Dict:
      if (v.dict->kind == DictKind::Plain) return v.dict->entries.size();
      break;
    default: break;
  }
  runtime_error(str("object of type '", type_name(v), "' has no len()"));
}

// ---- filters ----

Value f_attr(Renderer& r, const Value& v, const CallArgs& a) {
  const Value name = a.get(0, "name");
  if (!name.is_string()) runtime_error("attr() needs an attribute name");
  return r.get_attr(v, name.str());
}

Value f_batch(Renderer& r, const Value& v, const CallArgs& a) {
  const int64_t n = int_arg(a.get(0, "linecount"), "batch size");
  if (n <= 0) runtime_error("batch size must be positive");
  const Value fill = a.get(1, "fill_with", Value::none());
  std::vector<Value> rows, cur;
  for (const Value& item : r.iterate(v)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) rows.push_back(make_list(r, std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (!fill.is_none()) {
      r.budget().charge(static_cast<uint64_t>(n) - cur.size());
      cur.resize(static_cast<size_t>(n), fill);
    }
    rows.push_back(make_list(r, std::move(cur)));
  }
  return make_generator(r, std::move(rows));
}

Value f_length(Renderer&, const Value& v, const CallArgs&) { return Value::integer(static_cast<int64_t>(py_len(v))); }

Value f_default(Renderer& r, const Value& v, const CallArgs& a) {
  const bool boolean = truthy(a.get(1, "boolean", Value::boolean(false)));
  if (!v.is_undefined() && (!boolean || truthy(v))) return v;
  const Value* fallback = a.find(0, "default_value");
  return fallback ? *fallback : r.make_string("");
}

Value f_dictsort(Renderer& r, const Value& v, const CallArgs& a) {
  if (v.kind != Kind::Dict || v.dict->kind != DictKind::Plain) runtime_error("dictsort() needs a dict");
  const bool cs = truthy(a.get(0, "case_sensitive", Value::boolean(false)));
  const Value by = a.get(1, "by", Value::undefined());
  const bool by_value = by.is_string() && by.str() == "value";
  const bool reverse = truthy(a.get(2, "reverse", Value::boolean(false)));
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.dict->entries) pairs.push_back(r.heap().make_tuple({k, val}));
  stable_sort_values(r, pairs, [&](const Value& x, const Value& y) {
    const size_t i = by_value ? 1 : 0;
    return less_than(sort_key(r, x.list->items[i], cs), sort_key(r, y.list->items[i], cs));
  }, reverse);
  return make_list(r, std::move(pairs));
}

Value f_first(Renderer& r, const Value& v, const CallArgs&) {
  if (v.is_list()) return v.list->items.empty() ? Value::undefined() : v.list->items.front();
  const std::vector<Value> items = r.iterate(v);
  return items.empty() ? Value::undefined() : items.front();
}

Value f_last(Renderer& r, const Value& v, const CallArgs&) {
  if (v.is_list() && v.list->seq == SeqKind::Generator) runtime_error("'generator' object is not reversible");
  if (v.is_list()) return v.list->items.empty() ? Value::undefined() : v.list->items.back();
  const std::vector<Value> items = r.iterate(v);
  return items.empty() ? Value::undefined() : items.back();
}

Value f_items(Renderer& r, const Value& v, const CallArgs&) {
  if (v.is_undefined()) return make_generator(r, {});
  if (v.kind != Kind::Dict || v.dict->kind != DictKind::Plain) runtime_error("items() needs a mapping");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict->entries) out.push_back(r.heap().make_tuple({k, val}));
  return make_generator(r, std::move(out));
}

Value f_join(Renderer& r, const Value& v, const CallArgs& a) {
  const Value sep = a.get(0, "d", Value::undefined());
  const Value attr = a.get(1, "attribute", Value::undefined());
  const std::string sep_text = sep.is_undefined() ? std::string() : as_text(r, sep);
  std::string out;
  bool first = true;
  for (const Value& item : r.iterate(v)) {
    if (!first) out += sep_text;
    first = false;
    append_str(out, attr.is_undefined() ? item : get_path(r, item, attr), r.max_string());
  }
  return r.make_string(std::move(out));
}

Value f_list(Renderer& r, const Value& v, const CallArgs&) { return make_list(r, r.iterate(v)); }
Value f_safe(Renderer&, const Value& v, const CallArgs&) { return v; }

// map, select, reject, selectattr and rejectattr of a false value (none,
// undefined, empty) give nothing, as Jinja2's `if value:` guard does.
Value f_map(Renderer& r, const Value& v, const CallArgs& a) {
  std::vector<Value> out;
  if (!truthy(v)) return make_generator(r, std::move(out));
  if (const Value* attr = a.find(SIZE_MAX, "attribute")) {
    const Value fallback = a.get(SIZE_MAX, "default", Value::undefined());
    for (const Value& item : r.iterate(v)) {
      Value x = get_path(r, item, *attr);
      out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
    }
    return make_generator(r, std::move(out));
  }
  if (a.positional.empty() || !a.positional[0].is_string()) runtime_error("map() needs a filter name or attribute=");
  const std::string& name = a.positional[0].str();
  if (!is_filter_name(name)) runtime_error(str("no filter named '", name, "'"));
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : r.iterate(v)) out.push_back(apply_filter(r, name, item, rest));
  return make_generator(r, std::move(out));
}

Value min_max(Renderer& r, const Value& v, const CallArgs& a, bool want_max) {
  const bool cs = truthy(a.get(0, "case_sensitive", Value::boolean(false)));
  const Value attr = a.get(1, "attribute", Value::undefined());
  const std::vector<Value> items = r.iterate(v);
  if (items.empty()) return Value::undefined();
  size_t best = 0;
  auto key = [&](const Value& x) { return sort_key(r, attr.is_undefined() ? x : get_path(r, x, attr), cs); };
  for (size_t k = 1; k < items.size(); ++k) {
    const bool better = want_max ? less_than(key(items[best]), key(items[k])) : less_than(key(items[k]), key(items[best]));
    if (better) best = k;
  }
  return items[best];
}
Value f_max(Renderer& r, const Value& v, const CallArgs& a) { return min_max(r, v, a, true); }
Value f_min(Renderer& r, const Value& v, const CallArgs& a) { return min_max(r, v, a, false); }

Value f_reverse(Renderer& r, const Value& v, const CallArgs&) {
  if (v.is_string()) return r.slice(v, Value::none(), Value::none(), Value::integer(-1));
  std::vector<Value> items = r.iterate(v);
  std::reverse(items.begin(), items.end());
  return make_generator(r, std::move(items));
}

Value select_impl(Renderer& r, const Value& v, const CallArgs& a, bool by_attr, bool keep_if) {
  if (!truthy(v)) return make_generator(r, {});
  size_t k = 0;
  Value attr;
  if (by_attr) {
    if (a.positional.empty()) runtime_error("selectattr/rejectattr need an attribute name");
    attr = a.positional[k++];
  }
  std::string test;
  if (k < a.positional.size()) {
    if (!a.positional[k].is_string()) runtime_error("the test name must be a string");
    test = a.positional[k++].str();
    if (!is_test_name(test)) runtime_error(str("no test named '", test, "'"));
  }
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + static_cast<long>(std::min(k, a.positional.size())), a.positional.end());
  std::vector<Value> out;
  for (const Value& item : r.iterate(v)) {
    const Value x = by_attr ? get_path(r, item, attr) : item;
    const bool pass = test.empty() ? truthy(x) : apply_test(r, test, x, rest);
    if (pass == keep_if) out.push_back(item);
  }
  return make_generator(r, std::move(out));
}
Value f_select(Renderer& r, const Value& v, const CallArgs& a) { return select_impl(r, v, a, false, true); }
Value f_reject(Renderer& r, const Value& v, const CallArgs& a) { return select_impl(r, v, a, false, false); }
Value f_selectattr(Renderer& r, const Value& v, const CallArgs& a) { return select_impl(r, v, a, true, true); }
Value f_rejectattr(Renderer& r, const Value& v, const CallArgs& a) { return select_impl(r, v, a, true, false); }

// Attribute specs "a" or "a,b.c" (several sort keys) -> list of keys.
std::vector<Value> attribute_keys(Renderer& r, const Value& attr) {
  std::vector<Value> keys;
  if (attr.is_undefined() || attr.is_none()) return keys;
  if (!attr.is_string() || attr.str().find(',') == std::string::npos) return {attr};
  const std::string& s = attr.str();
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    keys.push_back(r.make_string(py_strip(s.substr(start, comma - start), nullptr, true, true)));
    start = comma + 1;
  }
  return keys;
}

Value f_sort(Renderer& r, const Value& v, const CallArgs& a) {
  const bool reverse = truthy(a.get(0, "reverse", Value::boolean(false)));
  const bool cs = truthy(a.get(1, "case_sensitive", Value::boolean(false)));
  const std::vector<Value> keys = attribute_keys(r, a.get(2, "attribute", Value::undefined()));
  std::vector<Value> items = r.iterate(v);
  auto key_of = [&](const Value& x, const Value& k) { return sort_key(r, k.is_undefined() ? x : get_path(r, x, k), cs); };
  stable_sort_values(r, items, [&](const Value& x, const Value& y) {
    if (keys.empty()) return less_than(key_of(x, Value()), key_of(y, Value()));
    for (const Value& k : keys) {
      const Value kx = key_of(x, k), ky = key_of(y, k);
      if (less_than(kx, ky)) return true;
      if (less_than(ky, kx)) return false;
    }
    return false;
  }, reverse);
  return make_list(r, std::move(items));
}

Value f_sum(Renderer& r, const Value& v, const CallArgs& a) {
  const Value attr = a.get(0, "attribute", Value::undefined());
  Value total = a.get(1, "start", Value::integer(0));
  for (const Value& item : r.iterate(v)) total = r.binary_op(BinOp::Add, total, attr.is_undefined() ? item : get_path(r, item, attr));
  return total;
}

Value f_unique(Renderer& r, const Value& v, const CallArgs& a) {
  const bool cs = truthy(a.get(0, "case_sensitive", Value::boolean(false)));
  const Value attr = a.get(1, "attribute", Value::undefined());
  std::vector<Value> out, seen;
  for (const Value& item : r.iterate(v)) {
    const Value key = sort_key(r, attr.is_undefined() ? item : get_path(r, item, attr), cs);
    bool dup = false;
    for (const Value& s : seen) {
      r.budget().charge(1);
      if (equals(s, key)) { dup = true; break; }
    }
    if (!dup) seen.push_back(key), out.push_back(item);
  }
  return make_generator(r, std::move(out));
}

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"attr", f_attr}, {"batch", f_batch}, {"count", f_length}, {"d", f_default}, {"default", f_default},
      {"dictsort", f_dictsort}, {"first", f_first}, {"items", f_items}, {"join", f_join}, {"last", f_last},
      {"length", f_length}, {"list", f_list}, {"map", f_map}, {"max", f_max}, {"min", f_min},
      {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"reverse", f_reverse}, {"safe", f_safe},
      {"select", f_select}, {"selectattr", f_selectattr}, {"sort", f_sort}, {"sum", f_sum},
      {"unique", f_unique},
  };
  return table;
}

}  // namespace

int64_t int_arg(const Value& v, const char* what) {
  if (!v.is_int()) runtime_error(str(what, " must be an integer, not ", type_name(v)));
  return v.as_int();
}

bool is_filter_name(std::string_view name) {
  return filter_table().count(name) != 0 || find_string_filter(name) != nullptr;
}

Value apply_filter(Renderer& r, std::string_view name, const Value& input, const CallArgs& args) {
  auto it = filter_table().find(name);
  const FilterFn fn = it != filter_table().end() ? it->second : find_string_filter(name);
  if (!fn) runtime_error(str("no filter named '", name, "'"));
  r.budget().charge(1);
  return fn(r, input, args);
}


}  // namespace rf::jinja
