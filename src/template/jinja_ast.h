// Syntax tree of a parsed Jinja template. Built once by the parser and only
// read afterwards, so one tree serves concurrent renders. Nodes are plain
// structs with a kind tag; the comments say which fields each kind uses.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_value.h"

namespace rf::jinja {

enum class ExprKind : uint8_t {
  Literal,   // literal (strings point at `name`, which owns the text)
  Name,      // name
  List,      // items
  Tuple,     // items
  Dict,      // items: key0, value0, key1, value1, ...
  GetAttr,   // items[0] . name
  GetItem,   // items[0] [ items[1] ]
  Slice,     // items[0] [ items[1] : items[2] : items[3] ] (absent parts null)
  Call,      // items[0] ( args )
  Filter,    // items[0] | name ( args ); items[0] null in filter blocks
  Test,      // items[0] is name ( args )
  Neg,       // - items[0]
  Pos,       // + items[0]
  Not,       // not items[0]
  Binary,    // items[0] bin_op items[1]
  And,       // items[0] and items[1]
  Or,        // items[0] or items[1]
  Compare,   // items[0] cmp_ops[0] items[1] cmp_ops[1] items[2] ...
  Concat,    // items[0] ~ items[1] ~ ...
  Cond,      // items[0] if items[1] else items[2] (items[2] may be null)
};

enum class BinOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  enum class Kind : uint8_t { Positional, Keyword, Star, DoubleStar };
  Kind kind = Kind::Positional;
  std::string name;  // Keyword
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::Literal;
  int line = 0;
  std::string name;
  Value literal;
  BinOp bin_op = BinOp::Add;
  std::vector<CmpOp> cmp_ops;
  std::vector<ExprPtr> items;
  std::vector<Arg> args;
};

enum class StmtKind : uint8_t {
  Text,         // text
  Output,       // {{ expr }}
  If,           // conds[k] -> bodies[k]; else_body
  For,          // for targets in expr [if filter]: body; else_body
  Set,          // set targets = expr; or set targets[0].targets[1] = expr when ns_attr
  SetBlock,     // set targets[0] | filters: body
  Macro,        // macro text(params): body
  FilterBlock,  // filter filters: body
  With,         // with params (name = value): body, in a new scope
  Generation,   // generation: body (rendered as is)
  Break,
  Continue,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::Text;
  int line = 0;
  std::string text;
  ExprPtr expr;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body, else_body;
  std::vector<std::string> targets;
  bool ns_attr = false;
  ExprPtr filter;
  std::vector<ExprPtr> filters;
  std::vector<std::pair<std::string, ExprPtr>> params;
  bool uses_varargs = false;  // Macro: its body reads `varargs` (else extra positional args are an error)
  bool uses_kwargs = false;   // Macro: its body reads `kwargs` (else unknown keyword args are an error)
};

}  // namespace rf::jinja
