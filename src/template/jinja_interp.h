// The Jinja interpreter: renders a parsed template (jinja_ast.h) against a
// JSON context. One Renderer serves one render call and owns all of its
// state (heap, scopes, output, budget), so concurrent renders of one
// Template share only the read-only syntax tree.
//
// Scoping follows Jinja2: the template's top level is one scope; each for
// iteration, macro call and `with` block gets a child scope, and `set`
// writes to the innermost one (so a loop cannot change outer variables
// except through a namespace()). Statement execution and evaluation live in
// jinja_interp.cpp; operators, attribute and item access in jinja_ops.cpp.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "template/jinja_ast.h"
#include "template/jinja_builtins.h"
#include "template/jinja_value.h"

namespace rf::jinja {

struct RenderOptions {
  Limits limits;
  std::optional<std::string> date;  // YYYY-MM-DD seen by strftime_now(); else the current local time
};

// A template variable bound to JSON that the caller owns (no copy is made).
// Later variables of the same name replace earlier ones.
struct Variable {
  std::string name;
  std::variant<const nlohmann::json*, const nlohmann::ordered_json*> value;
};

// A parsed template; render() is const and thread-safe.
class Template {
 public:
  // Throws TemplateError(Kind::Syntax) naming the line.
  explicit Template(std::string_view source, const Limits& limits = Limits());
  // `context` must be a JSON object: its keys become template variables.
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options) const;
  std::string render(const std::vector<Variable>& variables, const RenderOptions& options) const;

 private:
  Body body_;
};

struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string_view, Value>> vars;  // names point into the AST or the heap
  bool captured = false;  // a macro closes over it: never recycled

  Value* find_local(std::string_view name);
  void set(std::string_view name, const Value& v);
};

class Renderer {
 public:
  explicit Renderer(const RenderOptions& options);
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  std::string render(const Body& body, const std::vector<Variable>& variables);

  // ---- services for the built-ins ----
  Heap& heap() { return heap_; }
  Budget& budget() { return budget_; }
  const RenderOptions& options() const { return options_; }
  size_t max_string() const { return options_.limits.max_output_bytes; }
  Value make_string(std::string s) { return heap_.make_string(std::move(s)); }
  std::string to_str(const Value& v) const;  // Python str(); Undefined -> ""
  Value call(const Value& callee, const CallArgs& args);
  // Jinja's getattr (attribute, then item) and getitem (item, then attribute).
  // `name` must outlive the render (an AST or heap string): an Undefined
  // result remembers it for error messages.
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  std::vector<Value> iterate(const Value& v);  // for loops and filters; Undefined -> empty
  Value binary_op(BinOp op, const Value& a, const Value& b);
  bool compare(CmpOp op, const Value& a, const Value& b);
  bool contains(const Value& container, const Value& item);
  // Python's "fmt % args".
  Value percent_format(const std::string& fmt, const Value& args);

 private:
  enum class Flow { Normal, Break, Continue };
  struct DepthGuard {
    Renderer& r;
    explicit DepthGuard(Renderer& renderer);
    ~DepthGuard() { --r.depth_; }
  };

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_if(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  std::string capture(const Body& body);
  Flow exec_scoped(const Body& body, Scope* inner);  // runs body in `inner`, then releases it
  std::string capture_scoped(const Body& body);     // output of body run in a child scope
  Value apply_filter_chain(const std::vector<ExprPtr>& chain, Value v);

  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_filter(const Expr& e, const Value& input);
  CallArgs eval_args(const std::vector<Arg>& args);
  Value lookup(const std::string& name);
  Value call_macro(const FuncObj& fn, const CallArgs& args);
  void assign_targets(Scope* scope, const std::vector<std::string>& targets, const Value& v);
  void emit(std::string_view text);
  void emit_value(const Value& v);

  Scope* acquire_scope(Scope* parent);
  void release_scope(Scope* s);

  RenderOptions options_;
  Budget budget_;
  Heap heap_;
  std::deque<Scope> scopes_;
  std::vector<Scope*> free_scopes_;
  Scope* scope_ = nullptr;  // innermost
  std::string* out_ = nullptr;
  int depth_ = 0;
  int line_ = 0;  // of the node being evaluated, for runtime errors
};

}  // namespace rf::jinja
