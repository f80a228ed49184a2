#include "template/jinja_parser.h"

#include <initializer_list>
#include <set>

#include "core/error.h"
#include "template/jinja_builtins.h"
#include "template/jinja_lexer.h"

namespace rocket::jinja {

namespace {

// Statement tags of Jinja2 (and its standard extensions) that the subset leaves out.
constexpr std::string_view kUnsupportedTags[] = {"include", "import", "from",  "extends", "block",   "call",
                                                 "filter",  "with",   "autoescape", "do",  "trans", "pluralize"};
// Names that only mean something inside constructs the subset leaves out ({% call %}, varargs macros).
constexpr std::string_view kUnsupportedNames[] = {"caller", "varargs", "kwargs"};

Stmt make_stmt(StmtKind kind, int line) {
  Stmt s;
  s.kind = kind;
  s.line = line;
  return s;
}

ExprPtr make(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Template run() {
    Template tpl;
    tpl.body = body({});
    for (const auto& [name, line] : called_) {
      if (!macros_.count(name) && !is_global_function(name)) {
        fail("chat template line {}: unsupported function '{}' (neither a global the engine provides nor a macro the "
             "template defines)",
             line, name);
      }
    }
    return tpl;
  }

 private:
  // ---- token access

  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  int line() const { return peek().line; }

  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    ++i_;
    return true;
  }

  [[noreturn]] void error(int at_line, const std::string& what) const { fail("chat template line {}: {}", at_line, what); }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kEnd: return "end of template";
      case TokenKind::kBlockEnd: return "'%}'";
      case TokenKind::kVarEnd: return "'}}'";
      case TokenKind::kBlockBegin: return "'{%'";
      case TokenKind::kVarBegin: return "'{{'";
      case TokenKind::kString: return "a string";
      default: return "'" + t.text + "'";
    }
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) error(line(), fmt::format("expected '{}', found {}", op, describe(peek())));
  }
  void expect(TokenKind kind, std::string_view what) {
    if (peek().kind != kind) error(line(), fmt::format("expected {}, found {}", what, describe(peek())));
    ++i_;
  }
  std::string expect_name(std::string_view what) {
    if (peek().kind != TokenKind::kName) error(line(), fmt::format("expected {}, found {}", what, describe(peek())));
    return next().text;
  }

  // ---- statements

  // Statements up to a `{% name %}` tag with a name in `ends` (left unconsumed) or the end of input.
  Body body(std::initializer_list<std::string_view> ends, std::string_view opener = "", int opener_line = 0) {
    Body out;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::kEnd) {
        if (ends.size() == 0) return out;
        error(opener_line, fmt::format("'{}' block is never closed (expected '{{% {} %}}')", opener, *ends.begin()));
      }
      if (t.kind == TokenKind::kData) {
        Stmt s = make_stmt(StmtKind::kText, t.line);
        s.text = t.text;
        out.push_back(std::move(s));
        ++i_;
      } else if (t.kind == TokenKind::kVarBegin) {
        ++i_;
        Stmt s = make_stmt(StmtKind::kOutput, t.line);
        s.expr = tuple_expr(true);
        expect(TokenKind::kVarEnd, "'}}'");
        out.push_back(std::move(s));
      } else if (t.kind == TokenKind::kBlockBegin) {
        if (peek(1).kind == TokenKind::kName) {
          for (const std::string_view end : ends) {
            if (peek(1).text == end) return out;
          }
        }
        ++i_;
        statement(out);
      } else {
        error(t.line, fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  // Consumes `{% name %}` closing a block.
  void close(std::string_view name) {
    expect(TokenKind::kBlockBegin, "'{%'");
    if (!skip_name(name)) error(line(), fmt::format("expected '{}', found {}", name, describe(peek())));
    expect(TokenKind::kBlockEnd, "'%}'");
  }

  void statement(Body& out) {
    const int at = line();
    const std::string tag = expect_name("a statement name");
    if (tag == "if") return out.push_back(if_stmt(at));
    if (tag == "for") return out.push_back(for_stmt(at));
    if (tag == "set") return out.push_back(set_stmt(at));
    if (tag == "macro") return out.push_back(macro_stmt(at));
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error(at, fmt::format("'{}' outside of a loop", tag));
      expect(TokenKind::kBlockEnd, "'%}'");
      return out.push_back(make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, at));
    }
    if (tag == "generation") {
      // HF transformers' marker for assistant-token masks: renders its body unchanged.
      expect(TokenKind::kBlockEnd, "'%}'");
      Body inner = body({"endgeneration"}, "generation", at);
      close("endgeneration");
      for (Stmt& s : inner) out.push_back(std::move(s));
      return;
    }
    for (const std::string_view unsupported : kUnsupportedTags) {
      if (tag == unsupported) {
        error(at, fmt::format("unsupported construct '{{% {} %}}' (outside the Jinja subset chat templates are compiled with)", tag));
      }
    }
    if (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif") error(at, fmt::format("unexpected '{{% {} %}}'", tag));
    error(at, fmt::format("unknown statement '{{% {} %}}'", tag));
  }

  Stmt if_stmt(int at) {
    Stmt s = make_stmt(StmtKind::kIf, at);
    s.conds.push_back(tuple_expr(false));
    expect(TokenKind::kBlockEnd, "'%}'");
    while (true) {
      s.bodies.push_back(body({"elif", "else", "endif"}, "if", at));
      ++i_;  // {%
      const std::string tag = next().text;
      if (tag == "elif") {
        s.conds.push_back(tuple_expr(false));
        expect(TokenKind::kBlockEnd, "'%}'");
      } else if (tag == "else") {
        expect(TokenKind::kBlockEnd, "'%}'");
        s.bodies.push_back(body({"endif"}, "if", at));
        close("endif");
        return s;
      } else {
        expect(TokenKind::kBlockEnd, "'%}'");
        return s;
      }
    }
  }

  // Names bound by for/set: `a`, `a, b` or `(a, b)`.
  std::vector<std::string> targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      if (paren && is_op(")")) break;
      names.push_back(expect_name("a variable name"));
    } while (skip_op(","));
    if (paren) expect_op(")");
    for (const auto& n : names) check_assignable(n);
    return names;
  }

  void check_assignable(const std::string& name) const {
    if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" || name == "None") {
      error(line(), fmt::format("cannot assign to '{}'", name));
    }
  }

  Stmt for_stmt(int at) {
    Stmt s = make_stmt(StmtKind::kFor, at);
    s.targets = targets();
    for (const auto& t : s.targets) {
      if (t == "loop") error(at, "cannot assign to the special loop variable 'loop'");
    }
    if (!skip_name("in")) error(line(), fmt::format("expected 'in', found {}", describe(peek())));
    s.expr = tuple_expr(false, {"recursive"});
    if (skip_name("if")) s.filter = expression(true);
    if (is_name("recursive")) error(line(), "unsupported construct 'recursive' loop");
    expect(TokenKind::kBlockEnd, "'%}'");
    ++loop_depth_;
    ++nesting_;
    s.bodies.push_back(body({"else", "endfor"}, "for", at));
    --loop_depth_;
    if (is_name("else", 1)) {
      i_ += 2;
      expect(TokenKind::kBlockEnd, "'%}'");
      s.bodies.push_back(body({"endfor"}, "for", at));
    }
    --nesting_;
    close("endfor");
    return s;
  }

  Stmt set_stmt(int at) {
    Stmt s = make_stmt(StmtKind::kSet, at);
    if (peek().kind == TokenKind::kName && is_op(".", 1)) {
      s.targets.push_back(next().text);
      ++i_;
      s.attr = expect_name("an attribute name");
    } else {
      s.targets = targets();
    }
    if (skip_op("=")) {
      s.expr = tuple_expr(true);
      expect(TokenKind::kBlockEnd, "'%}'");
      return s;
    }
    if (is_op("|")) error(line(), "unsupported construct: filtered block '{% set ... | filter %}'");
    if (s.targets.size() != 1 || !s.attr.empty()) error(at, "a block '{% set %}' assigns exactly one name");
    expect(TokenKind::kBlockEnd, "'%}' or '='");
    s.kind = StmtKind::kSetBlock;
    s.bodies.push_back(body({"endset"}, "set", at));
    close("endset");
    return s;
  }

  Stmt macro_stmt(int at) {
    // Jinja2 closes a macro over the loop or macro it is defined in; the interpreter runs macros over
    // the top level only, so that is the one place they may be defined.
    if (nesting_ > 0) error(at, "unsupported construct: a macro defined inside a loop or another macro");
    Stmt s = make_stmt(StmtKind::kMacro, at);
    s.name = expect_name("a macro name");
    check_assignable(s.name);
    macros_.insert(s.name);
    expect_op("(");
    bool defaults = false;
    while (!is_op(")")) {
      const std::string param = expect_name("a parameter name");
      ExprPtr def;
      if (skip_op("=")) {
        def = expression(true);
        defaults = true;
      } else if (defaults) {
        error(line(), "non-default argument follows default argument");
      }
      s.params.emplace_back(param, std::move(def));
      if (!skip_op(",")) break;
    }
    expect_op(")");
    expect(TokenKind::kBlockEnd, "'%}'");
    // A loop outside the macro does not make break/continue valid inside it.
    const int saved = loop_depth_;
    loop_depth_ = 0;
    ++nesting_;
    s.bodies.push_back(body({"endmacro"}, "macro", at));
    --nesting_;
    loop_depth_ = saved;
    close("endmacro");
    return s;
  }

  // ---- expressions (Jinja2's precedence, loosest first)

  bool at_tuple_end(std::initializer_list<std::string_view> extra_ends) const {
    const Token& t = peek();
    if (t.kind == TokenKind::kBlockEnd || t.kind == TokenKind::kVarEnd || t.kind == TokenKind::kEnd || is_op(")")) return true;
    for (const std::string_view e : extra_ends) {
      if (is_name(e)) return true;
    }
    return false;
  }

  // An expression, or several separated by commas (a tuple without parentheses).
  ExprPtr tuple_expr(bool with_condexpr, std::initializer_list<std::string_view> extra_ends = {}) {
    const int at = line();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty() && at_tuple_end(extra_ends)) break;
      items.push_back(expression(with_condexpr));
      if (!skip_op(",")) break;
      is_tuple = true;
    }
    if (!is_tuple) return std::move(items.front());
    auto e = make(ExprKind::kTuple, at);
    e->args = std::move(items);
    return e;
  }

  ExprPtr expression(bool with_condexpr) { return with_condexpr ? condexpr() : or_expr(); }

  ExprPtr condexpr() {
    ExprPtr e = or_expr();
    while (is_name("if")) {
      const int at = line();
      ++i_;
      auto c = make(ExprKind::kCondExpr, at);
      c->args.push_back(or_expr());
      c->args.push_back(std::move(e));
      c->args.push_back(skip_name("else") ? condexpr() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(ExprKind kind, ExprPtr left, ExprPtr right, int at, std::string op = "") {
    auto e = make(kind, at);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      const int at = next().line;
      e = binary(ExprKind::kOr, std::move(e), and_expr(), at);
    }
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      const int at = next().line;
      e = binary(ExprKind::kAnd, std::move(e), not_expr(), at);
    }
    return e;
  }

  ExprPtr not_expr() {
    if (is_name("not")) {
      auto e = make(ExprKind::kNot, next().line);
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }

  ExprPtr compare() {
    const int at = line();
    ExprPtr first = math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      std::string op;
      const Token& t = peek();
      if (t.kind == TokenKind::kOperator && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" ||
                                             t.text == ">" || t.text == ">=")) {
        op = t.text;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        i_ += 2;
      } else {
        break;
      }
      ops.push_back(op);
      operands.push_back(math1());
    }
    if (ops.empty()) return first;
    auto e = make(ExprKind::kCompare, at);
    e->args.push_back(std::move(first));
    for (auto& o : operands) e->args.push_back(std::move(o));
    e->ops = std::move(ops);
    return e;
  }

  // + and -
  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      e = binary(ExprKind::kBinary, std::move(e), concat(), op.line, op.text);
    }
    return e;
  }

  // ~ binds tighter than + in Jinja2.
  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) {
      const int at = next().line;
      e = binary(ExprKind::kBinary, std::move(e), math2(), at, "~");
    }
    return e;
  }

  ExprPtr math2() {
    ExprPtr e = pow_expr();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      e = binary(ExprKind::kBinary, std::move(e), pow_expr(), op.line, op.text);
    }
    return e;
  }

  // Left-associative in Jinja2, unlike Python.
  ExprPtr pow_expr() {
    ExprPtr e = unary(true);
    while (is_op("**")) {
      const int at = next().line;
      e = binary(ExprKind::kBinary, std::move(e), unary(true), at, "**");
    }
    return e;
  }

  ExprPtr unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      e = make(op.text == "-" ? ExprKind::kNeg : ExprKind::kPos, op.line);
      e->args.push_back(unary(false));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filters_and_tests(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = peek();
    const int at = t.line;
    switch (t.kind) {
      case TokenKind::kName: {
        ++i_;
        auto e = make(ExprKind::kConst, at);
        if (t.text == "true" || t.text == "True") {
          e->value = Value::boolean(true);
        } else if (t.text == "false" || t.text == "False") {
          e->value = Value::boolean(false);
        } else if (t.text == "none" || t.text == "None") {
          e->value = Value::none();
        } else {
          for (const std::string_view n : kUnsupportedNames) {
            if (t.text == n) error(at, fmt::format("unsupported name '{}' (only meaningful in constructs outside the subset)", n));
          }
          e->kind = ExprKind::kName;
          e->name = t.text;
        }
        return e;
      }
      case TokenKind::kString: {
        std::string s;
        while (peek().kind == TokenKind::kString) s += next().text;
        auto e = make(ExprKind::kConst, at);
        e->value = Value::string(std::move(s));
        return e;
      }
      case TokenKind::kInteger: {
        ++i_;
        auto e = make(ExprKind::kConst, at);
        try {
          e->value = Value::integer(std::stoll(t.text));
        } catch (const std::out_of_range&) {
          error(at, fmt::format("integer literal {} does not fit 64 bits", t.text));
        }
        return e;
      }
      case TokenKind::kFloat: {
        ++i_;
        auto e = make(ExprKind::kConst, at);
        e->value = Value::floating(std::strtod(t.text.c_str(), nullptr));
        return e;
      }
      default:
        break;
    }
    if (skip_op("(")) {
      if (skip_op(")")) return make(ExprKind::kTuple, at);
      ExprPtr inner = expression(true);
      if (is_op(",")) {
        auto e = make(ExprKind::kTuple, at);
        e->args.push_back(std::move(inner));
        while (skip_op(",")) {
          if (is_op(")")) break;
          e->args.push_back(expression(true));
        }
        inner = std::move(e);
      }
      expect_op(")");
      return inner;
    }
    if (skip_op("[")) {
      auto e = make(ExprKind::kList, at);
      while (!is_op("]")) {
        e->args.push_back(expression(true));
        if (!skip_op(",")) break;
      }
      expect_op("]");
      return e;
    }
    if (skip_op("{")) {
      auto e = make(ExprKind::kDict, at);
      while (!is_op("}")) {
        e->args.push_back(expression(true));
        expect_op(":");
        e->args.push_back(expression(true));
        if (!skip_op(",")) break;
      }
      expect_op("}");
      return e;
    }
    error(at, fmt::format("unexpected {}", describe(t)));
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      const int at = line();
      if (skip_op(".")) {
        if (peek().kind == TokenKind::kInteger) {
          auto g = make(ExprKind::kGetitem, at);
          g->args.push_back(std::move(e));
          auto index = make(ExprKind::kConst, at);
          const Token& digits = next();
          try {
            index->value = Value::integer(std::stoll(digits.text));
          } catch (const std::out_of_range&) {
            error(at, fmt::format("attribute index {} does not fit 64 bits", digits.text));
          }
          g->args.push_back(std::move(index));
          e = std::move(g);
        } else {
          auto g = make(ExprKind::kGetattr, at);
          g->name = expect_name("an attribute name");
          g->args.push_back(std::move(e));
          e = std::move(g);
        }
      } else if (skip_op("[")) {
        e = subscript(std::move(e), at);
      } else if (is_op("(")) {
        e = call(std::move(e), at);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr obj, int at) {
    // Either an index or a slice start:stop:step with any part absent.
    ExprPtr parts[3];
    size_t colons = 0;
    if (!is_op(":")) parts[0] = expression(true);
    while (colons < 2 && skip_op(":")) {
      ++colons;
      if (!is_op(":") && !is_op("]")) parts[colons] = expression(true);
    }
    expect_op("]");
    if (colons == 0) {
      if (!parts[0]) error(at, "empty subscript");
      auto g = make(ExprKind::kGetitem, at);
      g->args.push_back(std::move(obj));
      g->args.push_back(std::move(parts[0]));
      return g;
    }
    auto s = make(ExprKind::kSlice, at);
    s->args.push_back(std::move(obj));
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  // `(args)` after a callee; the callee must be a function name or a method.
  ExprPtr call(ExprPtr callee, int at) {
    if (callee->kind == ExprKind::kName) {
      called_.emplace_back(callee->name, at);
    } else if (callee->kind == ExprKind::kGetattr) {
      if (!is_method(callee->name)) error(at, fmt::format("unsupported method '{}'", callee->name));
    } else {
      error(at, "unsupported call: only functions, macros and methods can be called");
    }
    auto e = make(ExprKind::kCall, at);
    e->args.push_back(std::move(callee));
    call_args(*e);
    return e;
  }

  // `(a, b, key=c)` into e.args (appended) and e.kwargs.
  void call_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) error(line(), "unsupported construct: argument unpacking (* or **)");
      if (peek().kind == TokenKind::kName && is_op("=", 1)) {
        std::string key = next().text;
        ++i_;
        e.kwargs.emplace_back(std::move(key), expression(true));
      } else {
        if (!e.kwargs.empty()) error(line(), "positional argument follows keyword argument");
        e.args.push_back(expression(true));
      }
      if (!skip_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr filters_and_tests(ExprPtr e) {
    while (true) {
      const int at = line();
      if (skip_op("|")) {
        std::string name = expect_name("a filter name");
        while (skip_op(".")) name += "." + expect_name("a filter name");
        if (!is_filter(name)) error(at, fmt::format("unsupported filter '{}'", name));
        auto f = make(ExprKind::kFilter, at);
        f->name = name;
        f->args.push_back(std::move(e));
        if (is_op("(")) call_args(*f);
        e = std::move(f);
      } else if (skip_name("is")) {
        auto t = make(ExprKind::kTest, at);
        t->negated = skip_name("not");
        t->name = expect_name("a test name");
        if (!is_test(t->name)) error(at, fmt::format("unsupported test '{}'", t->name));
        t->args.push_back(std::move(e));
        const Token& n = peek();
        if (is_op("(")) {
          call_args(*t);
          if (!t->kwargs.empty()) error(at, fmt::format("test '{}' takes no keyword arguments", t->name));
        } else if ((n.kind == TokenKind::kName || n.kind == TokenKind::kString || n.kind == TokenKind::kInteger ||
                    n.kind == TokenKind::kFloat || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          // Jinja2's one-argument form without parentheses: `x is divisibleby 3`.
          if (is_name("is")) error(at, "tests cannot be chained with 'is'");
          t->args.push_back(postfix(primary()));
        }
        if (t->args.size() - 1 != test_arity(t->name)) {
          error(at, fmt::format("test '{}' takes {} argument(s), {} given", t->name, test_arity(t->name), t->args.size() - 1));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = call(std::move(e), at);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  int nesting_ = 0;  // for loops and macros around the current statement
  std::set<std::string> macros_;
  std::vector<std::pair<std::string, int>> called_;
};

}  // namespace

Template parse_template(std::string_view source) { return Parser(tokenize(source)).run(); }

}  // namespace rocket::jinja
