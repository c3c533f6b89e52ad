// Jinja parser, expressions: recursive descent in Jinja2's precedence order
// condexpr > or > and > not > compare > + - > ~ > * / // % > ** > unary >
// primary with postfix (. [] ()) and filters/tests (| is).
#include "template/jinja_builtins.h"
#include "template/jinja_parse_impl.h"

namespace rf::jinja::detail {

// A comma-separated list is a tuple; `stop_name` ends it early (for 'recursive').
ExprPtr Parser::parse_tuple(bool with_condexpr, bool explicit_parens, std::string_view stop_name) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    const Token& t = cur();
    if (t.type == TokType::VarEnd || t.type == TokType::BlockEnd || is_op(t, ")") ||
        (!stop_name.empty() && is_name(t, stop_name)))
      break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(cur(), ",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail(str("expected an expression, got ", describe(cur())));
  }
  auto e = node(ExprKind::Tuple, line);
  e->items = std::move(items);
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  if (!with_condexpr) return parse_or();
  ExprPtr expr = parse_or();
  ChainGuard chain(*this);
  while (is_name(cur(), "if")) {
    chain.grow();
    const int line = cur().line;
    next();
    ExprPtr cond = parse_or();
    ExprPtr otherwise;
    if (skip_name("else")) otherwise = parse_expression(true);
    auto e = node(ExprKind::Cond, line);
    e->items.push_back(std::move(expr));
    e->items.push_back(std::move(cond));
    e->items.push_back(std::move(otherwise));
    expr = std::move(e);
  }
  return expr;
}

ExprPtr Parser::binary(ExprKind kind, ExprPtr l, ExprPtr r, int line) {
  auto e = node(kind, line);
  e->items.push_back(std::move(l));
  e->items.push_back(std::move(r));
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  ChainGuard chain(*this);
  while (is_name(cur(), "or")) {
    chain.grow();
    const int line = cur().line;
    next();
    left = binary(ExprKind::Or, std::move(left), parse_and(), line);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  ChainGuard chain(*this);
  while (is_name(cur(), "and")) {
    chain.grow();
    const int line = cur().line;
    next();
    left = binary(ExprKind::And, std::move(left), parse_not(), line);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  DepthGuard guard(*this);
  if (is_name(cur(), "not")) {
    auto e = node(ExprKind::Not, cur().line);
    next();
    e->items.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  std::vector<CmpOp> ops;
  std::vector<ExprPtr> rest;
  while (true) {
    const Token& t = cur();
    CmpOp op;
    if (is_op(t, "==")) op = CmpOp::Eq;
    else if (is_op(t, "!=")) op = CmpOp::Ne;
    else if (is_op(t, "<")) op = CmpOp::Lt;
    else if (is_op(t, "<=")) op = CmpOp::Le;
    else if (is_op(t, ">")) op = CmpOp::Gt;
    else if (is_op(t, ">=")) op = CmpOp::Ge;
    else if (is_name(t, "in")) op = CmpOp::In;
    else if (is_name(t, "not") && is_name(look(), "in")) { op = CmpOp::NotIn; next(); }
    else break;
    next();
    ops.push_back(op);
    rest.push_back(parse_math1());
  }
  if (ops.empty()) return first;
  auto e = node(ExprKind::Compare, line);
  e->items.push_back(std::move(first));
  for (auto& r : rest) e->items.push_back(std::move(r));
  e->cmp_ops = std::move(ops);
  return e;
}

ExprPtr Parser::arith(BinOp op, ExprPtr l, ExprPtr r, int line) {
  auto e = binary(ExprKind::Binary, std::move(l), std::move(r), line);
  e->bin_op = op;
  return e;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  ChainGuard chain(*this);
  while (is_op(cur(), "+") || is_op(cur(), "-")) {
    chain.grow();
    const BinOp op = cur().value == "+" ? BinOp::Add : BinOp::Sub;
    const int line = cur().line;
    next();
    left = arith(op, std::move(left), parse_concat(), line);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const int line = cur().line;
  ExprPtr first = parse_math2();
  if (!is_op(cur(), "~")) return first;
  auto e = node(ExprKind::Concat, line);
  e->items.push_back(std::move(first));
  while (skip_op("~")) e->items.push_back(parse_math2());
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  ChainGuard chain(*this);
  while (true) {
    const Token& t = cur();
    BinOp op;
    if (is_op(t, "*")) op = BinOp::Mul;
    else if (is_op(t, "/")) op = BinOp::Div;
    else if (is_op(t, "//")) op = BinOp::FloorDiv;
    else if (is_op(t, "%")) op = BinOp::Mod;
    else break;
    chain.grow();
    const int line = t.line;
    next();
    left = arith(op, std::move(left), parse_pow(), line);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  ChainGuard chain(*this);
  while (is_op(cur(), "**")) {
    chain.grow();
    const int line = cur().line;
    next();
    left = arith(BinOp::Pow, std::move(left), parse_unary(true), line);
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  const int line = cur().line;
  ExprPtr e;
  if (is_op(cur(), "-") || is_op(cur(), "+")) {
    e = node(cur().value == "-" ? ExprKind::Neg : ExprKind::Pos, line);
    next();
    e->items.push_back(parse_unary(false));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::literal(Value v, int line) {
  auto e = node(ExprKind::Literal, line);
  e->literal = v;
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  const int line = t.line;
  switch (t.type) {
    case TokType::Name: {
      const std::string& n = t.value;
      ExprPtr e;
      if (n == "true" || n == "True") e = literal(Value::boolean(true), line);
      else if (n == "false" || n == "False") e = literal(Value::boolean(false), line);
      else if (n == "none" || n == "None") e = literal(Value::none(), line);
      else {
        e = node(ExprKind::Name, line);
        e->name = n;
      }
      next();
      return e;
    }
    case TokType::String: {
      auto e = node(ExprKind::Literal, line);
      while (cur().type == TokType::String) {  // adjacent literals concatenate
        e->name += cur().value;
        next();
      }
      e->literal = Value::string(&e->name);
      return e;
    }
    case TokType::Integer: {
      auto e = literal(Value::integer(t.int_value), line);
      next();
      return e;
    }
    case TokType::Float: {
      auto e = literal(Value::number(t.float_value), line);
      next();
      return e;
    }
    default: break;
  }
  if (skip_op("(")) {
    ExprPtr e = parse_tuple(true, true, {});
    expect_op(")");
    return e;
  }
  if (skip_op("[")) {
    auto e = node(ExprKind::List, line);
    while (!is_op(cur(), "]")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op(cur(), "]")) break;
      e->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
  }
  if (skip_op("{")) {
    auto e = node(ExprKind::Dict, line);
    while (!is_op(cur(), "}")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op(cur(), "}")) break;
      e->items.push_back(parse_expression(true));
      expect_op(":");
      e->items.push_back(parse_expression(true));
    }
    expect_op("}");
    return e;
  }
  fail(str("unexpected ", describe(t)));
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  ChainGuard chain(*this);
  while (true) {
    const Token& t = cur();
    const int line = t.line;
    if (is_op(t, ".") || is_op(t, "[") || is_op(t, "(")) chain.grow();
    if (is_op(t, ".")) {
      next();
      if (cur().type == TokType::Name) {
        auto g = node(ExprKind::GetAttr, line);
        g->name = cur().value;
        g->items.push_back(std::move(e));
        e = std::move(g);
      } else if (cur().type == TokType::Integer) {
        auto g = node(ExprKind::GetItem, line);
        g->items.push_back(std::move(e));
        g->items.push_back(literal(Value::integer(cur().int_value), line));
        e = std::move(g);
      } else {
        fail(str("expected an attribute name after '.', got ", describe(cur())));
      }
      next();
    } else if (is_op(t, "[")) {
      next();
      e = parse_subscript(std::move(e), line);
    } else if (is_op(t, "(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj, int line) {
  std::vector<ExprPtr> parts;  // each an index expression or a Slice (with null obj)
  while (!is_op(cur(), "]")) {
    if (!parts.empty()) expect_op(",");
    parts.push_back(parse_subscribed());
  }
  expect_op("]");
  if (parts.empty()) fail("expected a subscript");
  if (parts.size() == 1 && parts[0]->kind == ExprKind::Slice && parts[0]->items[0] == nullptr) {
    parts[0]->items[0] = std::move(obj);
    return std::move(parts[0]);
  }
  auto g = node(ExprKind::GetItem, line);
  g->items.push_back(std::move(obj));
  if (parts.size() == 1) {
    g->items.push_back(std::move(parts[0]));
  } else {
    auto tup = node(ExprKind::Tuple, line);
    tup->items = std::move(parts);
    g->items.push_back(std::move(tup));
  }
  return g;
}

ExprPtr Parser::parse_subscribed() {
  const int line = cur().line;
  ExprPtr start;
  if (!is_op(cur(), ":")) {
    start = parse_expression(true);
    if (!is_op(cur(), ":")) return start;
  }
  next();  // ':'
  auto s = node(ExprKind::Slice, line);
  s->items.push_back(nullptr);  // the sliced object, filled in by the caller
  s->items.push_back(std::move(start));
  auto part_ends = [&] { return is_op(cur(), "]") || is_op(cur(), ",") || is_op(cur(), ":"); };
  s->items.push_back(part_ends() ? nullptr : parse_expression(true));
  ExprPtr step;
  if (skip_op(":") && !is_op(cur(), "]") && !is_op(cur(), ",")) step = parse_expression(true);
  s->items.push_back(std::move(step));
  return s;
}

void Parser::parse_args(std::vector<Arg>& args) {
  expect_op("(");
  while (!is_op(cur(), ")")) {
    if (!args.empty()) expect_op(",");
    if (is_op(cur(), ")")) break;
    Arg a;
    if (skip_op("**")) {
      a.kind = Arg::Kind::DoubleStar;
    } else if (skip_op("*")) {
      a.kind = Arg::Kind::Star;
    } else if (cur().type == TokType::Name && is_op(look(), "=")) {
      a.kind = Arg::Kind::Keyword;
      a.name = cur().value;
      next();
      next();
    }
    a.value = parse_expression(true);
    args.push_back(std::move(a));
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto c = node(ExprKind::Call, cur().line);
  c->items.push_back(std::move(callee));
  parse_args(c->args);
  return c;
}

std::string Parser::parse_dotted_name() {
  std::string n = expect_name();
  while (is_op(cur(), ".") && look().type == TokType::Name) {
    next();
    n += '.';
    n += expect_name();
  }
  return n;
}

ExprPtr Parser::parse_filter_call(ExprPtr operand) {
  const int line = cur().line;
  auto f = node(ExprKind::Filter, line);
  f->name = parse_dotted_name();
  if (!is_filter_name(f->name)) fail_at(str("no filter named '", f->name, "'"), line);
  f->items.push_back(std::move(operand));
  if (is_op(cur(), "(")) parse_args(f->args);
  return f;
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  ChainGuard chain(*this);
  while (true) {
    if (is_op(cur(), "|") || is_name(cur(), "is") || is_op(cur(), "(")) chain.grow();
    if (skip_op("|")) {
      e = parse_filter_call(std::move(e));
    } else if (is_name(cur(), "is")) {
      e = parse_test(std::move(e));
    } else if (is_op(cur(), "(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_test(ExprPtr operand) {
  const int line = cur().line;
  next();  // 'is'
  const bool negated = skip_name("not");
  auto t = node(ExprKind::Test, line);
  t->name = parse_dotted_name();
  if (!is_test_name(t->name)) fail_at(str("no test named '", t->name, "'"), line);
  t->items.push_back(std::move(operand));
  const Token& c = cur();
  if (is_op(c, "(")) {
    parse_args(t->args);
  } else if ((c.type == TokType::Name || c.type == TokType::String || c.type == TokType::Integer ||
              c.type == TokType::Float || is_op(c, "[") || is_op(c, "{")) &&
             !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
    if (is_name(c, "is")) fail("tests cannot be chained with 'is'");
    Arg a;
    a.value = parse_postfix(parse_primary());
    t->args.push_back(std::move(a));
  }
  if (!negated) return t;
  auto n = node(ExprKind::Not, line);
  n->items.push_back(std::move(t));
  return n;
}

}  // namespace rf::jinja::detail
