// The Jinja parser's internals, shared by jinja_parser.cpp (statements and
// the driver) and jinja_parse_expr.cpp (expressions): a recursive-descent
// parser over the lexer's tokens with Jinja2's grammar. Every recursion and
// every left-nested chain (a + b + c, x.y.z, x|f|g) counts against
// max_depth, so the tree it builds is never deeper than that.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_ast.h"
#include "template/jinja_lexer.h"

namespace rf::jinja::detail {

std::string describe(const Token& t);  // a token as error messages name it

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth) : toks_(std::move(tokens)), max_depth_(max_depth) {}

  Body parse_all();

 private:
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > p.max_depth_) p.fail(str("template nested too deeply (limit ", p.max_depth_, ")"));
    }
    ~DepthGuard() { --p.depth_; }
  };
  // Left-nested chains built in a loop (a + b + c, x.y.z, x|f|g) deepen the
  // tree without recursing here; each link counts as one level of nesting.
  struct ChainGuard {
    Parser& p;
    int links = 0;
    explicit ChainGuard(Parser& parser) : p(parser) {}
    void grow() {
      ++links;
      if (++p.depth_ > p.max_depth_) p.fail(str("expression nested too deeply (limit ", p.max_depth_, ")"));
    }
    ~ChainGuard() { p.depth_ -= links; }
  };
  const Token& cur() const { return toks_[pos_]; }
  const Token& look(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  static bool is_op(const Token& t, std::string_view op) { return t.type == TokType::Operator && t.value == op; }
  static bool is_name(const Token& t, std::string_view n) { return t.type == TokType::Name && t.value == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(cur(), op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(cur(), n)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(const std::string& msg) const { fail_at(msg, cur().line); }
  [[noreturn]] static void fail_at(const std::string& msg, int line) {
    throw TemplateError(TemplateError::Kind::Syntax, msg, line);
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(str("expected '", op, "', got ", describe(cur())));
  }
  std::string expect_name() {
    if (cur().type != TokType::Name) fail(str("expected a name, got ", describe(cur())));
    std::string n = cur().value;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != TokType::BlockEnd) fail(str("expected end of statement block, got ", describe(cur())));
    next();
  }

  ExprPtr node(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements ----

  // Parses until a block whose tag name is in `ends`; leaves the position after
  // that name and stores it in *which. `open_line` names the unclosed block.
  Body subparse(std::initializer_list<std::string_view> ends, std::string* which, int open_line);
  StmtPtr parse_statement();
  void parse_if(Stmt& s);
  std::vector<std::string> parse_targets(std::string_view end_name);
  void parse_for(Stmt& s);
  void parse_set(Stmt& s);
  void parse_macro(Stmt& s);

  // Whether a name is read anywhere in a macro body (nested macros included).
  static bool expr_reads(const Expr& e, std::string_view name);
  static bool body_reads(const Body& body, std::string_view name);

  // `| a | b(1)` (or `a | b` right after a filter tag): Filter nodes with no operand.
  std::vector<ExprPtr> parse_filter_chain();

  // ---- expressions ----

  // A comma-separated list is a tuple; `stop_name` ends it early (for 'recursive').
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, std::string_view stop_name);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr binary(ExprKind kind, ExprPtr l, ExprPtr r, int line);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr arith(BinOp op, ExprPtr l, ExprPtr r, int line);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr literal(Value v, int line);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj, int line);
  ExprPtr parse_subscribed();
  void parse_args(std::vector<Arg>& args);
  ExprPtr parse_call(ExprPtr callee);
  std::string parse_dotted_name();
  ExprPtr parse_filter_call(ExprPtr operand);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_test(ExprPtr operand);

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
  int loop_depth_ = 0;
};

}  // namespace rf::jinja::detail
