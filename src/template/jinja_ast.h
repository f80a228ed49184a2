// Syntax tree of a compiled chat template (built by jinja_parser.h, run by jinja_render.h).
//
// One node type for expressions and one for statements, each a kind plus the fields that kind uses
// (listed per kind below): the interpreter is a switch over kinds, and the tree is immutable after
// parsing, so a compiled template may be rendered from any number of threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_value.h"

namespace rocket::jinja {

enum class ExprKind {
  kConst,      // value
  kName,       // name
  kList,       // args: items
  kTuple,      // args: items
  kDict,       // args: key, value, key, value, ...
  kGetattr,    // args[0].name
  kGetitem,    // args[0][args[1]]
  kSlice,      // args[0][args[1]:args[2]:args[3]], absent bounds are null
  kCall,       // args[0] (a kName: macro or global function; a kGetattr: method) called with args[1..], kwargs
  kFilter,     // args[0] | name(args[1..], kwargs)
  kTest,       // args[0] is [not] name(args[1..])
  kNeg,        // -args[0]
  kPos,        // +args[0]
  kNot,        // not args[0]
  kBinary,     // args[0] name args[1], name one of + - * / // % ** ~
  kAnd,        // args[0] and args[1]
  kOr,         // args[0] or args[1]
  kCompare,    // args[0] ops[0] args[1] ops[1] args[2] ..., Python's chained comparison
  kCondExpr,   // args[1] if args[0] else args[2]; a null args[2] gives Undefined
};

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  Value value;
  std::string name;
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
  std::vector<std::string> ops;  // ==, !=, <, <=, >, >=, in, not in
  bool negated = false;
};
using ExprPtr = std::unique_ptr<Expr>;

enum class StmtKind {
  kText,      // text: template data, copied to the output
  kOutput,    // {{ expr }}
  kIf,        // conds[i] guards bodies[i]; a last body without a condition is the else branch
  kFor,       // for targets in expr [if filter]: bodies[0], else: bodies[1]
  kSet,       // set targets = expr; with attr: set targets[0].attr = expr (a namespace)
  kSetBlock,  // set targets[0]: bodies[0] rendered to a string
  kMacro,     // macro name(params): bodies[0]
  kBreak,
  kContinue,
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  std::vector<std::string> targets;
  std::string attr;
  ExprPtr filter;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default is null when the parameter has none
};

struct Template {
  Body body;
};

}  // namespace rocket::jinja
