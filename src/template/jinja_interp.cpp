// Statement execution and expression evaluation of the Jinja interpreter
// (see jinja_interp.h).
#include "template/jinja_interp.h"

#include <nlohmann/json.hpp>

#include "template/jinja_parser.h"

namespace rf::jinja {

// ---- Template ----

Template::Template(std::string_view source, const Limits& limits) : body_(parse_template(source, limits.max_depth)) {}

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!context.is_object()) throw TemplateError(TemplateError::Kind::Runtime, "the template context must be a JSON object");
  std::vector<Variable> variables;
  variables.reserve(context.size());
  for (const auto& [key, value] : context.items()) variables.push_back({key, &value});
  return render(variables, options);
}

std::string Template::render(const std::vector<Variable>& variables, const RenderOptions& options) const {
  Renderer r(options);
  return r.render(body_, variables);
}

// ---- Scope ----

Value* Scope::find_local(std::string_view name) {
  for (auto& [n, v] : vars)
    if (n == name) return &v;
  return nullptr;
}

void Scope::set(std::string_view name, const Value& v) {
  if (Value* existing = find_local(name)) *existing = v;
  else vars.emplace_back(name, v);
}

// ---- Renderer ----

// Runtime nesting (statements, expressions, calls) may reach 4x the parse
// depth, which leaves room for macro recursion while bounding the stack.
Renderer::DepthGuard::DepthGuard(Renderer& renderer) : r(renderer) {
  if (r.depth_ + 1 > r.options_.limits.max_depth * 4)
    throw TemplateError(TemplateError::Kind::Limit, "recursion too deep (nested macro calls or expressions)");
  ++r.depth_;
}

Renderer::Renderer(const RenderOptions& options) : options_(options), budget_(options_.limits), heap_(budget_) {}

Scope* Renderer::acquire_scope(Scope* parent) {
  Scope* s;
  if (!free_scopes_.empty()) {
    s = free_scopes_.back();
    free_scopes_.pop_back();
  } else {
    budget_.charge(4);
    scopes_.emplace_back();
    s = &scopes_.back();
  }
  s->parent = parent;
  return s;
}

void Renderer::release_scope(Scope* s) {
  if (s->captured) return;
  s->vars.clear();
  s->parent = nullptr;
  free_scopes_.push_back(s);
}

std::string Renderer::render(const Body& body, const std::vector<Variable>& variables) {
  Scope* globals = acquire_scope(nullptr);
  globals->captured = true;
  for (std::string_view name : global_function_names()) {
    FuncObj* fn = heap_.make_func();
    fn->kind = FuncKind::Global;
    fn->name = name;
    globals->set(name, Value::of(fn));
  }
  Scope* top = acquire_scope(globals);
  top->captured = true;
  for (const Variable& var : variables) {
    const Value name = heap_.make_string(var.name);
    const Value value = std::visit([&](const auto* json) { return from_json(*json, heap_); }, var.value);
    top->set(name.str(), value);
  }
  scope_ = top;
  std::string out;
  out_ = &out;
  try {
    exec_body(body);
  } catch (const TemplateError& e) {
    if (e.line() == 0 && line_ > 0 && e.kind() != TemplateError::Kind::Syntax)
      throw TemplateError(e.kind(), e.message(), line_);
    throw;
  }
  return out;
}

std::string Renderer::to_str(const Value& v) const {
  if (v.kind == Kind::String) return v.str();
  std::string s;
  append_str(s, v, max_string());
  return s;
}

void Renderer::emit(std::string_view text) {
  if (out_->size() + text.size() > options_.limits.max_output_bytes)
    throw TemplateError(TemplateError::Kind::Limit,
                        str("output longer than ", options_.limits.max_output_bytes, " bytes"));
  out_->append(text);
}

void Renderer::emit_value(const Value& v) {
  if (v.kind == Kind::String) return emit(v.str());
  if (v.kind == Kind::Undefined) return;
  emit(to_str(v));
}

std::string Renderer::capture(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec_body(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

// ---- statements ----

Renderer::Flow Renderer::exec_body(const Body& body) {
  for (const auto& s : body) {
    const Flow f = exec(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::exec(const Stmt& s) {
  DepthGuard guard(*this);
  budget_.charge(1);
  line_ = s.line;
  switch (s.kind) {
    case StmtKind::Text: emit(s.text); break;
    case StmtKind::Output: emit_value(eval(*s.expr)); break;
    case StmtKind::If: return exec_if(s);
    case StmtKind::For: return exec_for(s);
    case StmtKind::Set: exec_set(s); break;
    case StmtKind::SetBlock: {  // the body runs in its own scope, as in Jinja2
      Value v = make_string(capture_scoped(s.body));
      scope_->set(s.targets[0], apply_filter_chain(s.filters, v));
      break;
    }
    case StmtKind::Macro: {
      FuncObj* fn = heap_.make_func();
      fn->kind = FuncKind::Macro;
      fn->name = s.text;
      fn->macro = &s;
      fn->closure = scope_;
      scope_->captured = true;
      scope_->set(s.text, Value::of(fn));
      break;
    }
    case StmtKind::FilterBlock: {
      Value v = make_string(capture_scoped(s.body));
      emit_value(apply_filter_chain(s.filters, v));
      break;
    }
    case StmtKind::With: {
      Scope* inner = acquire_scope(scope_);
      for (const auto& [name, expr] : s.params) inner->set(name, eval(*expr));
      return exec_scoped(s.body, inner);
    }
    // transformers renders {% generation %} through a call block: a scope of its own.
    case StmtKind::Generation: return exec_scoped(s.body, acquire_scope(scope_));
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::exec_scoped(const Body& body, Scope* inner) {
  Scope* saved = scope_;
  scope_ = inner;
  Flow f;
  try {
    f = exec_body(body);
  } catch (...) {
    scope_ = saved;
    throw;
  }
  scope_ = saved;
  release_scope(inner);
  return f;
}

std::string Renderer::capture_scoped(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec_scoped(body, acquire_scope(scope_));
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Renderer::Flow Renderer::exec_if(const Stmt& s) {
  for (size_t k = 0; k < s.conds.size(); ++k)
    if (truthy(eval(*s.conds[k]))) return exec_body(s.bodies[k]);
  return exec_body(s.else_body);
}

void Renderer::assign_targets(Scope* scope, const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    scope->set(targets[0], v);
    return;
  }
  std::vector<Value> parts = iterate(v);
  if (parts.size() != targets.size())
    runtime_error(str(parts.size() < targets.size() ? "not enough" : "too many", " values to unpack (expected ",
                      targets.size(), ", got ", parts.size(), ")"));
  for (size_t k = 0; k < targets.size(); ++k) scope->set(targets[k], parts[k]);
}

Renderer::Flow Renderer::exec_for(const Stmt& s) {
  std::vector<Value> items = iterate(eval(*s.expr));
  Scope* outer = scope_;
  if (s.filter) {  // `for x in xs if cond`: filter first, so loop.length counts what is kept
    std::vector<Value> kept;
    Scope* probe = acquire_scope(outer);
    scope_ = probe;
    try {
      for (const Value& item : items) {
        budget_.charge(1);
        assign_targets(probe, s.targets, item);
        if (truthy(eval(*s.filter))) kept.push_back(item);
      }
    } catch (...) {
      scope_ = outer;
      throw;
    }
    scope_ = outer;
    release_scope(probe);
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(s.else_body);

  // One loop object per loop, updated in place (as Jinja2's LoopContext is).
  static constexpr std::string_view kKeys[] = {"index", "index0", "revindex", "revindex0", "first", "last",
                                               "length", "previtem", "nextitem", "depth", "depth0", "cycle"};
  DictObj* loop = heap_.make_dict(DictKind::Loop);
  for (std::string_view k : kKeys) {
    loop->set(make_string(std::string(k)), Value::none());
  }
  FuncObj* cycle = heap_.make_func();
  cycle->kind = FuncKind::LoopCycle;
  cycle->name = "cycle";
  cycle->self = Value::of(loop);
  auto& e = loop->entries;
  const auto n = static_cast<int64_t>(items.size());
  e[6].second = Value::integer(n);
  e[9].second = Value::integer(1);
  e[10].second = Value::integer(0);
  e[11].second = Value::of(cycle);

  // Jinja2 renders the else block unless some iteration ran its body to the
  // end: a loop whose every pass ends in break or continue also gets it.
  bool completed_one = false;
  for (int64_t i = 0; i < n; ++i) {
    budget_.charge(1);
    e[0].second = Value::integer(i + 1);
    e[1].second = Value::integer(i);
    e[2].second = Value::integer(n - i);
    e[3].second = Value::integer(n - i - 1);
    e[4].second = Value::boolean(i == 0);
    e[5].second = Value::boolean(i == n - 1);
    e[7].second = i > 0 ? items[i - 1] : Value::undefined();
    e[8].second = i + 1 < n ? items[i + 1] : Value::undefined();
    Scope* iter = acquire_scope(outer);
    assign_targets(iter, s.targets, items[i]);
    iter->set("loop", Value::of(loop));
    scope_ = iter;
    Flow f;
    try {
      f = exec_body(s.body);
    } catch (...) {
      scope_ = outer;
      throw;
    }
    scope_ = outer;
    release_scope(iter);
    if (f == Flow::Normal) completed_one = true;
    if (f == Flow::Break) break;
  }
  return completed_one ? Flow::Normal : exec_body(s.else_body);
}

void Renderer::exec_set(const Stmt& s) {
  const Value v = eval(*s.expr);
  if (!s.ns_attr) {
    assign_targets(scope_, s.targets, v);
    return;
  }
  const Value ns = lookup(s.targets[0]);
  if (ns.kind != Kind::Dict || ns.dict->kind != DictKind::Namespace)
    runtime_error(str("cannot assign attribute '", s.targets[1], "' on non-namespace object '", s.targets[0], "'"));
  ns.dict->set(Value::string(&s.targets[1]), v);
}

Value Renderer::apply_filter_chain(const std::vector<ExprPtr>& chain, Value v) {
  for (const auto& f : chain) v = eval_filter(*f, v);
  return v;
}

// ---- expressions ----

Value Renderer::lookup(const std::string& name) {
  for (Scope* s = scope_; s; s = s->parent)
    if (Value* v = s->find_local(name)) return *v;
  return Value::undefined(&name);
}

Value Renderer::eval(const Expr& e) {
  DepthGuard guard(*this);
  budget_.charge(1);
  line_ = e.line;
  switch (e.kind) {
    case ExprKind::Literal: return e.literal;
    case ExprKind::Name: return lookup(e.name);
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const auto& item : e.items) items.push_back(eval(*item));
      if (e.kind == ExprKind::Tuple) return heap_.make_tuple(std::move(items));
      ListObj* list = heap_.make_list(items.size());
      list->items = std::move(items);
      return Value::of(list);
    }
    case ExprKind::Dict: {
      DictObj* d = heap_.make_dict();
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        const Value key = eval(*e.items[k]);
        d->set(key, eval(*e.items[k + 1]));
      }
      return Value::of(d);
    }
    case ExprKind::GetAttr: return get_attr(eval(*e.items[0]), e.name);
    case ExprKind::GetItem: {
      const Value obj = eval(*e.items[0]);
      return get_item(obj, eval(*e.items[1]));
    }
    case ExprKind::Slice: {
      const Value obj = eval(*e.items[0]);
      const Value start = e.items[1] ? eval(*e.items[1]) : Value::none();
      const Value stop = e.items[2] ? eval(*e.items[2]) : Value::none();
      const Value step = e.items[3] ? eval(*e.items[3]) : Value::none();
      return slice(obj, start, stop, step);
    }
    case ExprKind::Call: return eval_call(e);
    case ExprKind::Filter: return eval_filter(e, eval(*e.items[0]));
    case ExprKind::Test: {
      const Value v = eval(*e.items[0]);
      return Value::boolean(apply_test(*this, e.name, v, eval_args(e.args)));
    }
    case ExprKind::Neg:
    case ExprKind::Pos: {
      const Value v = eval(*e.items[0]);
      if (v.kind == Kind::Float) return Value::number(e.kind == ExprKind::Neg ? -v.f : v.f);
      if (v.is_int()) {
        if (e.kind == ExprKind::Pos) return Value::integer(v.as_int());
        if (v.as_int() == INT64_MIN) runtime_error("integer overflow");
        return Value::integer(-v.as_int());
      }
      if (v.is_undefined()) return binary_op(BinOp::Sub, Value::integer(0), v);  // reports the undefined name
      runtime_error(str("bad operand type for unary ", e.kind == ExprKind::Neg ? "-" : "+", ": '", type_name(v), "'"));
    }
    case ExprKind::Not: return Value::boolean(!truthy(eval(*e.items[0])));
    case ExprKind::Binary: {
      const Value a = eval(*e.items[0]);
      const Value b = eval(*e.items[1]);
      line_ = e.line;
      return binary_op(e.bin_op, a, b);
    }
    case ExprKind::And: {
      const Value a = eval(*e.items[0]);
      return truthy(a) ? eval(*e.items[1]) : a;
    }
    case ExprKind::Or: {
      const Value a = eval(*e.items[0]);
      return truthy(a) ? a : eval(*e.items[1]);
    }
    case ExprKind::Compare: {
      Value left = eval(*e.items[0]);
      for (size_t k = 0; k < e.cmp_ops.size(); ++k) {
        const Value right = eval(*e.items[k + 1]);
        line_ = e.line;
        if (!compare(e.cmp_ops[k], left, right)) return Value::boolean(false);
        left = right;
      }
      return Value::boolean(true);
    }
    case ExprKind::Concat: {
      std::string s;
      for (const auto& item : e.items) {
        append_str(s, eval(*item), max_string());
      }
      return make_string(std::move(s));
    }
    case ExprKind::Cond: {
      if (truthy(eval(*e.items[1]))) return eval(*e.items[0]);
      return e.items[2] ? eval(*e.items[2]) : Value::undefined();
    }
  }
  return Value::undefined();
}

CallArgs Renderer::eval_args(const std::vector<Arg>& args) {
  CallArgs out;
  for (const Arg& a : args) {
    const Value v = eval(*a.value);
    switch (a.kind) {
      case Arg::Kind::Positional: out.positional.push_back(v); break;
      case Arg::Kind::Keyword: out.keyword.emplace_back(a.name, v); break;
      case Arg::Kind::Star:
        for (const Value& item : iterate(v)) out.positional.push_back(item);
        break;
      case Arg::Kind::DoubleStar:
        if (v.kind != Kind::Dict) runtime_error("argument after ** must be a mapping");
        for (const auto& [k, val] : v.dict->entries) {
          if (k.kind != Kind::String) runtime_error("keywords must be strings");
          out.keyword.emplace_back(k.str(), val);
        }
        break;
    }
  }
  return out;
}

Value Renderer::eval_call(const Expr& e) {
  const Expr& callee = *e.items[0];
  if (callee.kind == ExprKind::GetAttr) {  // obj.method(...) without allocating a bound method
    const Value obj = eval(*callee.items[0]);
    if (obj.kind != Kind::Undefined && has_method(obj, callee.name)) {
      const CallArgs args = eval_args(e.args);
      line_ = e.line;
      return call_method(*this, obj, callee.name, args);
    }
    const Value fn = get_attr(obj, callee.name);
    const CallArgs args = eval_args(e.args);
    line_ = e.line;
    return call(fn, args);
  }
  const Value fn = eval(callee);
  const CallArgs args = eval_args(e.args);
  line_ = e.line;
  return call(fn, args);
}

Value Renderer::eval_filter(const Expr& e, const Value& input) {
  const CallArgs args = eval_args(e.args);
  line_ = e.line;
  return apply_filter(*this, e.name, input, args);
}

Value Renderer::call(const Value& callee, const CallArgs& args) {
  DepthGuard guard(*this);
  if (callee.kind == Kind::Undefined)
    runtime_error(callee.s ? str("'", *callee.s, "' is undefined") : std::string("cannot call an undefined value"));
  if (callee.kind != Kind::Func) runtime_error(str("'", type_name(callee), "' object is not callable"));
  const FuncObj& fn = *callee.fn;
  switch (fn.kind) {
    case FuncKind::Global: return call_global(*this, fn.name, args);
    case FuncKind::Method: return call_method(*this, fn.self, fn.name, args);
    case FuncKind::Macro: return call_macro(fn, args);
    case FuncKind::LoopCycle: {
      if (args.positional.empty()) runtime_error("no items for cycling given");
      const Value* index0 = fn.self.dict->find("index0");
      const int64_t i = index0 ? index0->as_int() : 0;
      return args.positional[static_cast<size_t>(i) % args.positional.size()];
    }
  }
  return Value::undefined();
}

Value Renderer::call_macro(const FuncObj& fn, const CallArgs& args) {
  const Stmt& m = *fn.macro;
  Scope* s = acquire_scope(fn.closure);
  Scope* saved = scope_;
  scope_ = s;
  std::string out;
  try {
    std::vector<bool> used(args.keyword.size(), false);
    for (size_t k = 0; k < m.params.size(); ++k) {
      const auto& [pname, def] = m.params[k];
      Value v = Value::undefined(&pname);
      bool found = false;
      if (k < args.positional.size()) {
        v = args.positional[k];
        found = true;
      }
      for (size_t j = 0; j < args.keyword.size(); ++j) {
        if (args.keyword[j].first != pname) continue;
        if (found) runtime_error(str("macro '", m.text, "' got multiple values for argument '", pname, "'"));
        v = args.keyword[j].second;
        used[j] = found = true;
      }
      if (!found && def) v = eval(*def);
      s->set(pname, v);
    }
    if (args.positional.size() > m.params.size() && !m.uses_varargs)
      runtime_error(str("macro '", m.text, "' takes not more than ", m.params.size(), " argument(s)"));
    for (size_t j = 0; j < args.keyword.size(); ++j)
      if (!used[j] && !m.uses_kwargs)
        runtime_error(str("macro '", m.text, "' takes no keyword argument '", args.keyword[j].first, "'"));
    std::vector<Value> extra;
    for (size_t k = m.params.size(); k < args.positional.size(); ++k) extra.push_back(args.positional[k]);
    s->set("varargs", heap_.make_tuple(std::move(extra)));
    DictObj* kwargs = heap_.make_dict();
    for (size_t j = 0; j < args.keyword.size(); ++j)
      if (!used[j]) kwargs->set(make_string(std::string(args.keyword[j].first)), args.keyword[j].second);
    s->set("kwargs", Value::of(kwargs));
    out = capture(m.body);
  } catch (...) {
    scope_ = saved;
    throw;
  }
  scope_ = saved;
  release_scope(s);
  return make_string(std::move(out));
}

}  // namespace rf::jinja
