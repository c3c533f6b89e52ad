// Jinja parser (see jinja_parser.h): the driver and statements. Follows
// Jinja2's grammar; unknown tags, filters and tests are syntax errors here,
// as Jinja2 reports them when compiling a template.
#include "template/jinja_parser.h"

#include "template/jinja_builtins.h"
#include "template/jinja_parse_impl.h"

namespace rf::jinja {

namespace detail {

std::string describe(const Token& t) {
  switch (t.type) {
    case TokType::Name:
    case TokType::Operator: return "'" + t.value + "'";
    case TokType::String: return "string literal";
    case TokType::Integer:
    case TokType::Float: return "number";
    default: return token_type_name(t.type);
  }
}

Body Parser::parse_all() {
  std::string end;
  Body body = subparse({}, &end, 1);
  return body;
}

// Parses until a block whose tag name is in `ends`; leaves the position after
// that name and stores it in *which. `open_line` names the unclosed block.
Body Parser::subparse(std::initializer_list<std::string_view> ends, std::string* which, int open_line) {
  DepthGuard guard(*this);
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == TokType::Eof) {
      if (ends.size() == 0) return body;
      std::string names;
      for (auto e : ends) names += (names.empty() ? "'" : " or '") + std::string(e) + "'";
      fail_at(str("unexpected end of template; expected ", names, " to close the block opened at line ", open_line),
              t.line);
    }
    if (t.type == TokType::Text) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::Text;
      s->line = t.line;
      s->text = t.value;
      body.push_back(std::move(s));
      next();
    } else if (t.type == TokType::VarBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::Output;
      s->line = t.line;
      next();
      s->expr = parse_tuple(true, false, {});
      if (cur().type != TokType::VarEnd) fail(str("expected end of print statement, got ", describe(cur())));
      next();
      body.push_back(std::move(s));
    } else if (t.type == TokType::BlockBegin) {
      next();
      if (cur().type != TokType::Name) fail(str("expected a tag name, got ", describe(cur())));
      const std::string& name = cur().value;
      if (std::find(ends.begin(), ends.end(), name) != ends.end()) {
        *which = name;
        next();
        return body;
      }
      body.push_back(parse_statement());
    } else {
      fail(str("unexpected ", describe(t)));
    }
  }
}

StmtPtr Parser::parse_statement() {
  const Token& t = cur();
  const int line = t.line;
  const std::string tag = t.value;
  next();
  auto s = std::make_unique<Stmt>();
  s->line = line;
  if (tag == "if") {
    parse_if(*s);
  } else if (tag == "for") {
    parse_for(*s);
  } else if (tag == "set") {
    parse_set(*s);
  } else if (tag == "macro") {
    parse_macro(*s);
  } else if (tag == "filter") {
    s->kind = StmtKind::FilterBlock;
    s->filters = parse_filter_chain();
    expect_block_end();
    std::string end;
    s->body = subparse({"endfilter"}, &end, line);
    expect_block_end();
  } else if (tag == "with") {
    s->kind = StmtKind::With;
    while (cur().type != TokType::BlockEnd) {
      if (!s->params.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      s->params.emplace_back(std::move(name), parse_expression(true));
    }
    expect_block_end();
    std::string end;
    s->body = subparse({"endwith"}, &end, line);
    expect_block_end();
  } else if (tag == "generation") {
    s->kind = StmtKind::Generation;
    expect_block_end();
    std::string end;
    s->body = subparse({"endgeneration"}, &end, line);
    expect_block_end();
  } else if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) fail_at(str("'", tag, "' outside of a loop"), line);
    s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
    expect_block_end();
  } else {
    fail_at(str("unknown or unsupported tag '", tag, "'"), line);
  }
  return s;
}

void Parser::parse_if(Stmt& s) {
  s.kind = StmtKind::If;
  std::string which;
  while (true) {
    s.conds.push_back(parse_tuple(false, false, {}));
    expect_block_end();
    s.bodies.push_back(subparse({"elif", "else", "endif"}, &which, s.line));
    if (which != "elif") break;
  }
  if (which == "else") {
    expect_block_end();
    s.else_body = subparse({"endif"}, &which, s.line);
  }
  expect_block_end();
}

std::vector<std::string> Parser::parse_targets(std::string_view end_name) {
  std::vector<std::string> names;
  const bool paren = skip_op("(");
  while (true) {
    names.push_back(expect_name());
    if (!skip_op(",")) break;
    if ((paren && is_op(cur(), ")")) || (!end_name.empty() && is_name(cur(), end_name)) || is_op(cur(), "="))
      break;
  }
  if (paren) expect_op(")");
  return names;
}

void Parser::parse_for(Stmt& s) {
  s.kind = StmtKind::For;
  s.targets = parse_targets("in");
  if (!skip_name("in")) fail(str("expected 'in', got ", describe(cur())));
  s.expr = parse_tuple(false, false, "recursive");
  if (skip_name("if")) s.filter = parse_expression(true);
  if (is_name(cur(), "recursive")) fail("recursive loops are not supported");
  expect_block_end();
  std::string which;
  ++loop_depth_;
  s.body = subparse({"endfor", "else"}, &which, s.line);
  --loop_depth_;
  if (which == "else") {
    expect_block_end();
    s.else_body = subparse({"endfor"}, &which, s.line);
  }
  expect_block_end();
}

void Parser::parse_set(Stmt& s) {
  if (cur().type == TokType::Name && is_op(look(), ".")) {
    s.ns_attr = true;
    s.targets.push_back(expect_name());
    next();  // '.'
    s.targets.push_back(expect_name());
  } else {
    s.targets = parse_targets("");
  }
  if (skip_op("=")) {
    s.kind = StmtKind::Set;
    s.expr = parse_tuple(true, false, {});
    expect_block_end();
    return;
  }
  if (s.ns_attr || s.targets.size() != 1) fail("expected '=' in a set statement with several targets");
  s.kind = StmtKind::SetBlock;
  if (is_op(cur(), "|")) s.filters = parse_filter_chain();
  expect_block_end();
  std::string which;
  const int saved_loops = loop_depth_;
  s.body = subparse({"endset"}, &which, s.line);
  loop_depth_ = saved_loops;
  expect_block_end();
}

void Parser::parse_macro(Stmt& s) {
  s.kind = StmtKind::Macro;
  s.text = expect_name();
  expect_op("(");
  while (!is_op(cur(), ")")) {
    if (!s.params.empty()) expect_op(",");
    if (is_op(cur(), ")")) break;
    std::string name = expect_name();
    ExprPtr def;
    if (skip_op("=")) def = parse_expression(true);
    s.params.emplace_back(std::move(name), std::move(def));
  }
  expect_op(")");
  expect_block_end();
  std::string which;
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;  // break/continue may not cross a macro boundary
  s.body = subparse({"endmacro"}, &which, s.line);
  loop_depth_ = saved_loops;
  if (cur().type == TokType::Name && cur().value == s.text) next();
  expect_block_end();
  s.uses_varargs = body_reads(s.body, "varargs");
  s.uses_kwargs = body_reads(s.body, "kwargs");
  for (const auto& p : s.params) {
    if (p.second && expr_reads(*p.second, "varargs")) s.uses_varargs = true;
    if (p.second && expr_reads(*p.second, "kwargs")) s.uses_kwargs = true;
  }
}

// Whether a name is read anywhere in a macro body (nested macros included).
bool Parser::expr_reads(const Expr& e, std::string_view name) {
  if (e.kind == ExprKind::Name && e.name == name) return true;
  for (const auto& item : e.items)
    if (item && expr_reads(*item, name)) return true;
  for (const auto& a : e.args)
    if (a.value && expr_reads(*a.value, name)) return true;
  return false;
}

bool Parser::body_reads(const Body& body, std::string_view name) {
  for (const auto& st : body) {
    const Stmt& s = *st;
    for (const ExprPtr* e : {&s.expr, &s.filter})
      if (*e && expr_reads(**e, name)) return true;
    for (const auto& list : {&s.conds, &s.filters})
      for (const auto& e : *list)
        if (e && expr_reads(*e, name)) return true;
    for (const auto& p : s.params)
      if (p.second && expr_reads(*p.second, name)) return true;
    for (const auto& b : s.bodies)
      if (body_reads(b, name)) return true;
    if (body_reads(s.body, name) || body_reads(s.else_body, name)) return true;
  }
  return false;
}

// `| a | b(1)` (or `a | b` right after a filter tag): Filter nodes with no operand.
std::vector<ExprPtr> Parser::parse_filter_chain() {
  std::vector<ExprPtr> chain;
  bool first = !is_op(cur(), "|");
  while (first || skip_op("|")) {
    first = false;
    chain.push_back(parse_filter_call(nullptr));
  }
  return chain;
}

}  // namespace detail

Body parse_template(std::string_view source, int max_depth) {
  return detail::Parser(lex(source), max_depth).parse_all();
}

}  // namespace rf::jinja
