// Values of the Jinja interpreter and the per-render heap that owns them.
//
// A Value is a small copyable handle: scalars inline, strings/lists/dicts/
// functions as pointers into a Heap that lives for one render and frees
// everything at once (flat, so cyclic or deeply nested data can neither leak
// nor overflow the stack on destruction). Strings are immutable; lists and
// dicts are mutable and shared by reference, as in Python. Every allocation
// is charged to the render's Budget, which bounds time and memory.
// Helpers here implement Python semantics: truthiness, str()/repr(), ==, <,
// and json.dumps; all of them bound recursion depth and output size.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace rf::jinja {

// Resource bounds of one render (configurable through ChatTemplateOptions).
struct Limits {
  uint64_t max_steps = 10'000'000;       // evaluation steps and allocated elements
  size_t max_output_bytes = 4u << 20;    // the rendered text, and any one string
  int max_depth = 200;                   // nesting of expressions, calls and values
};

// Every failure of the template engine. `line` is 0 when unknown.
class TemplateError : public rf::Error {
 public:
  enum class Kind { Syntax, Runtime, Raised, Limit };
  TemplateError(Kind kind, const std::string& message, int line = 0);
  Kind kind() const { return kind_; }
  int line() const { return line_; }
  const std::string& message() const { return message_; }  // without the prefix

 private:
  Kind kind_;
  int line_;
  std::string message_;
};

[[noreturn]] void runtime_error(const std::string& message);  // Kind::Runtime, line filled in later

class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}
  void charge(uint64_t steps) {
    used_ += steps;
    if (used_ > limits_.max_steps) exceeded();
  }
  void check_string_size(size_t bytes) const;
  const Limits& limits() const { return limits_; }

 private:
  [[noreturn]] void exceeded() const;
  const Limits& limits_;
  uint64_t used_ = 0;
};

struct ListObj;
struct DictObj;
struct FuncObj;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Func };

struct Value {
  Kind kind = Kind::Undefined;
  union {
    bool b;
    int64_t i;
    double f;
    const std::string* s;  // String; for Undefined, the missing name (or null)
    ListObj* list;
    DictObj* dict;
    FuncObj* fn;
  };
  Value() : i(0) {}

  static Value undefined(const std::string* name = nullptr) { Value v; v.kind = Kind::Undefined; v.s = name; return v; }
  static Value none() { Value v; v.kind = Kind::None; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::Int; v.i = x; return v; }
  static Value number(double x) { Value v; v.kind = Kind::Float; v.f = x; return v; }
  static Value string(const std::string* x) { Value v; v.kind = Kind::String; v.s = x; return v; }
  static Value of(ListObj* x) { Value v; v.kind = Kind::List; v.list = x; return v; }
  static Value of(DictObj* x) { Value v; v.kind = Kind::Dict; v.dict = x; return v; }
  static Value of(FuncObj* x) { Value v; v.kind = Kind::Func; v.fn = x; return v; }

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_int() const { return kind == Kind::Int || kind == Kind::Bool; }  // Python: bool is an int
  bool is_number() const { return is_int() || kind == Kind::Float; }
  bool is_list() const { return kind == Kind::List; }  // any sequence: list, tuple, generator, dict view
  bool is_plain_list() const;  // list or tuple (not a generator or dict view)
  bool is_dict() const { return kind == Kind::Dict; }
  const std::string& str() const { return *s; }
  int64_t as_int() const { return kind == Kind::Bool ? int64_t(b) : i; }
  double as_double() const { return kind == Kind::Float ? f : double(as_int()); }
};

// What a sequence is in Python terms. Filters such as map/select return
// generators (always truthy, no len(), not subscriptable, consumed when
// iterated); dict.items()/keys()/values() return views (len() but no
// indexing). Both print as Python prints them.
enum class SeqKind : uint8_t { List, Generator, ItemsView, KeysView, ValuesView };

struct ListObj {
  std::vector<Value> items;
  bool is_tuple = false;
  SeqKind seq = SeqKind::List;
};

inline bool Value::is_plain_list() const { return kind == Kind::List && list->seq == SeqKind::List; }

enum class DictKind : uint8_t { Plain, Namespace, Loop };

struct DictObj {
  DictKind kind = DictKind::Plain;
  std::vector<std::pair<Value, Value>> entries;  // insertion order

  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;  // Python key equality (1 == 1.0 == True)
  // Inserts or replaces; keys must be strings, numbers, booleans or none.
  void set(const Value& key, const Value& value);

 private:
  static constexpr size_t kIndexFrom = 8;  // small dicts are searched linearly
  std::unordered_map<std::string_view, size_t> string_index_;  // keys point into the heap or the AST
};

struct Stmt;
struct Scope;

enum class FuncKind : uint8_t { Global, Method, Macro, LoopCycle };

struct FuncObj {
  FuncKind kind = FuncKind::Global;
  std::string_view name;           // global or method name (static storage)
  Value self;                      // the bound object of a method or loop.cycle
  const Stmt* macro = nullptr;      // a {% macro %} statement
  Scope* closure = nullptr;        // where a macro was defined
};

// Owns everything a render allocates; frees it all at once.
class Heap {
 public:
  explicit Heap(Budget& budget) : budget_(budget) {}
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  Value make_string(std::string s);
  ListObj* make_list(size_t reserve = 0);
  Value make_tuple(std::vector<Value> items);
  DictObj* make_dict(DictKind kind = DictKind::Plain);
  FuncObj* make_func();
  Budget& budget() { return budget_; }

 private:
  Budget& budget_;
  std::deque<std::string> strings_;
  std::deque<ListObj> lists_;
  std::deque<DictObj> dicts_;
  std::deque<FuncObj> funcs_;
};

// Python semantics.
bool truthy(const Value& v);
std::string type_name(const Value& v);  // "str", "int", "list", "dict", "NoneType", ...
// str(v) appended to out; throws a Limit error past max_bytes.
void append_str(std::string& out, const Value& v, size_t max_bytes, int depth = 0);
void append_repr(std::string& out, const Value& v, size_t max_bytes, int depth = 0);
bool equals(const Value& a, const Value& b, int depth = 0);
// Python's a < b; throws for unorderable types (like Python's TypeError).
bool less_than(const Value& a, const Value& b, int depth = 0);

struct JsonStyle {
  bool indent = false;          // json.dumps indent=None vs a number/string
  std::string indent_unit;      // when indent
  std::string item_sep = ", ";  // ", " without indent, "," with it
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
void append_json(std::string& out, const Value& v, const JsonStyle& style, size_t max_bytes, int depth = 0);

// Converts JSON input (messages, extra context) into heap values, keeping
// object key order.
// Instantiated for nlohmann::json and nlohmann::ordered_json.
template <typename Json>
Value from_json(const Json& j, Heap& heap, int depth = 0);

constexpr int kMaxValueDepth = 128;  // nesting of data values (printing, comparison, JSON)

}  // namespace rf::jinja
