// Built-in filters, tests, methods of str/list/dict, and global functions of
// the Jinja interpreter. Each takes the Renderer for allocation, limits and
// calling back into templates (macros, tests by name).
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "template/jinja_value.h"

namespace rf::jinja {

class Renderer;

// Evaluated call arguments: positional, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string_view, Value>> keyword;

  // The argument at `index` or named `name`, else null.
  const Value* find(size_t index, std::string_view name) const;
  Value get(size_t index, std::string_view name, Value fallback = Value::undefined()) const;
  // Fails when more than max_positional positional arguments, or a keyword
  // not in `names`, were given (`what` names the callee).
  void check(std::string_view what, size_t max_positional, std::initializer_list<std::string_view> names) const;
};

bool is_filter_name(std::string_view name);
// Internal: filters over strings, numbers and JSON (jinja_string_filters.cpp).
using FilterFn = Value (*)(Renderer&, const Value&, const CallArgs&);
FilterFn find_string_filter(std::string_view name);  // null when not one of them
int64_t int_arg(const Value& v, const char* what);   // an integer argument, else an error
bool is_test_name(std::string_view name);
Value apply_filter(Renderer& r, std::string_view name, const Value& input, const CallArgs& args);
bool apply_test(Renderer& r, std::string_view name, const Value& input, const CallArgs& args);

// Methods reachable as attributes: "strip" on a str, "items" on a dict, ...
bool has_method(const Value& self, std::string_view name);
Value call_method(Renderer& r, const Value& self, std::string_view name, const CallArgs& args);

// Python's str.format(); "fmt % args" is Renderer::percent_format.
Value format_string(Renderer& r, const std::string& fmt, const CallArgs& args);

// Global functions (range, namespace, dict, raise_exception, strftime_now, ...).
const std::vector<std::string_view>& global_function_names();
Value call_global(Renderer& r, std::string_view name, const CallArgs& args);

}  // namespace rf::jinja
