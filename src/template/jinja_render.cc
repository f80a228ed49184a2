#include "template/jinja_render.h"

#include "core/error.h"
#include "template/jinja_builtins.h"
#include "template/jinja_error.h"
#include "template/jinja_ops.h"

namespace rocket::jinja {

namespace {

// One level of variables. Scopes live on the interpreter's stack and only point outwards, so a parent
// always outlives its children.
class Scope {
 public:
  explicit Scope(Scope* parent) : parent_(parent) {}

  const Value* lookup(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent_) {
      for (const auto& [k, v] : s->vars_) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }

  void set(const std::string& name, Value v) {
    for (auto& [k, slot] : vars_) {
      if (k == name) {
        slot = std::move(v);
        return;
      }
    }
    vars_.emplace_back(name, std::move(v));
  }

 private:
  Scope* parent_;
  Object vars_;
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  explicit Renderer(Scope& root) : root_(root) {}

  Flow exec(const Body& body, Scope& scope, std::string& out) {
    for (const Stmt& s : body) {
      const Flow f = exec(s, scope, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  Flow exec(const Stmt& s, Scope& scope, std::string& out) {
    try {
      return exec_unchecked(s, scope, out);
    } catch (const TemplateException& e) {
      fail("chat template raised an exception (line {}): {}", s.line, e.what());
    } catch (const RenderError& e) {
      fail("chat template line {}: {}", s.line, e.what());
    }
  }

  void tick() {
    if (++steps_ > kMaxRenderSteps) render_fail("the template ran past {} steps (statements and loop iterations)", kMaxRenderSteps);
  }
  static void bound(const std::string& out) {
    if (int64_t(out.size()) > kMaxRenderBytes) render_fail("the template's output grew past {} bytes", kMaxRenderBytes);
  }

  Flow exec_unchecked(const Stmt& s, Scope& scope, std::string& out) {
    tick();
    switch (s.kind) {
      case StmtKind::kText:
        out += s.text;
        bound(out);
        return Flow::kNormal;
      case StmtKind::kOutput:
        out += to_str(eval(*s.expr, scope));
        bound(out);
        return Flow::kNormal;
      case StmtKind::kIf:
        for (size_t i = 0; i < s.bodies.size(); ++i) {
          if (i >= s.conds.size() || truthy(eval(*s.conds[i], scope))) return exec(s.bodies[i], scope, out);
        }
        return Flow::kNormal;
      case StmtKind::kFor:
        exec_for(s, scope, out);
        return Flow::kNormal;
      case StmtKind::kSet:
        exec_set(s, scope);
        return Flow::kNormal;
      case StmtKind::kSetBlock: {
        std::string captured;
        exec(s.bodies[0], scope, captured);
        scope.set(s.targets[0], Value::string(std::move(captured)));
        return Flow::kNormal;
      }
      case StmtKind::kMacro:
        scope.set(s.name, Value::macro(&s));
        return Flow::kNormal;
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  static void bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
    if (targets.size() == 1) {
      scope.set(targets[0], v);
      return;
    }
    const std::vector<Value> parts = iterate(v);
    if (parts.size() != targets.size()) {
      if (parts.size() > targets.size()) render_fail("too many values to unpack (expected {})", targets.size());
      render_fail("not enough values to unpack (expected {}, got {})", targets.size(), parts.size());
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], parts[i]);
  }

  void exec_for(const Stmt& s, Scope& scope, std::string& out) {
    const Value iterable = eval(*s.expr, scope);
    std::vector<Value> items;
    for (Value& item : iterate(iterable)) {
      if (s.filter) {
        tick();
        Scope probe(&scope);
        bind_targets(s.targets, item, probe);
        if (!truthy(eval(*s.filter, probe))) continue;
      }
      items.push_back(std::move(item));
    }
    const int64_t n = int64_t(items.size());
    for (int64_t i = 0; i < n; ++i) {
      tick();
      // Each iteration starts afresh: what one sets, the next does not see (Jinja2 semantics).
      Scope iteration(&scope);
      iteration.set("loop", Value::dict({
                                {"index", Value::integer(i + 1)},
                                {"index0", Value::integer(i)},
                                {"revindex", Value::integer(n - i)},
                                {"revindex0", Value::integer(n - i - 1)},
                                {"first", Value::boolean(i == 0)},
                                {"last", Value::boolean(i == n - 1)},
                                {"length", Value::integer(n)},
                                {"depth", Value::integer(1)},
                                {"depth0", Value::integer(0)},
                                {"previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined("there is no previous item")},
                                {"nextitem", i + 1 < n ? items[size_t(i + 1)] : Value::undefined("there is no next item")},
                            }));
      bind_targets(s.targets, items[size_t(i)], iteration);
      if (exec(s.bodies[0], iteration, out) == Flow::kBreak) break;
    }
    if (n == 0 && s.bodies.size() > 1) {
      Scope otherwise(&scope);
      exec(s.bodies[1], otherwise, out);
    }
  }

  void exec_set(const Stmt& s, Scope& scope) {
    Value v = eval(*s.expr, scope);
    if (s.attr.empty()) {
      bind_targets(s.targets, v, scope);
      return;
    }
    const Value* target = scope.lookup(s.targets[0]);
    if (!target || target->kind() != Value::Kind::kNamespace) {
      render_fail("cannot assign attribute on non-namespace object ('{}' is {})", s.targets[0],
                  target ? type_name(*target) : "undefined");
    }
    Object& attrs = target->as_namespace().attrs;
    for (auto& [k, slot] : attrs) {
      if (k == s.attr) {
        slot = std::move(v);
        return;
      }
    }
    attrs.emplace_back(s.attr, std::move(v));
  }

  Value call_macro(const Stmt& m, std::span<const Value> args, const Kwargs& kwargs) {
    if (depth_ >= kMaxMacroDepth) render_fail("macro '{}' recursed deeper than {} calls", m.name, kMaxMacroDepth);
    if (args.size() > m.params.size()) {
      render_fail("macro '{}' takes not more than {} argument(s), {} given", m.name, m.params.size(), args.size());
    }
    for (const auto& [key, unused] : kwargs) {
      bool known = false;
      for (size_t i = 0; i < m.params.size(); ++i) {
        if (m.params[i].first != key) continue;
        if (i < args.size()) render_fail("macro '{}' got multiple values for argument '{}'", m.name, key);
        known = true;
      }
      if (!known) render_fail("macro '{}' takes no keyword argument '{}'", m.name, key);
    }
    Scope scope(&root_);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const auto& [name, def] = m.params[i];
      const Value* given = nullptr;
      if (i < args.size()) given = &args[i];
      for (const auto& [key, value] : kwargs) {
        if (key == name) given = &value;
      }
      // Defaults see the parameters bound before them, as in Jinja2.
      scope.set(name, given ? *given : def ? eval(*def, scope) : Value::undefined(fmt::format("parameter '{}' was not provided", name)));
    }
    std::string out;
    ++depth_;
    exec(m.bodies[0], scope, out);
    --depth_;
    return Value::string(std::move(out));
  }

  Value eval_call(const Expr& e, Scope& scope) {
    Array args;
    for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i], scope));
    Kwargs kwargs;
    for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v, scope));
    const Expr& callee = *e.args[0];
    if (callee.kind == ExprKind::kGetattr) return call_method(eval(*callee.args[0], scope), callee.name, args, kwargs);
    // Variables shadow the globals, as in Jinja2.
    if (const Value* v = scope.lookup(callee.name)) {
      if (v->kind() != Value::Kind::kMacro) render_fail("'{}' object is not callable", type_name(*v));
      return call_macro(*v->as_macro(), args, kwargs);
    }
    if (is_global_function(callee.name)) return call_global(callee.name, args, kwargs);
    render_fail("'{}' is undefined", callee.name);
  }

  // Expressions nest in the source and through macro calls; the depth of both together is bounded,
  // so a macro that recurses through deeply nested expressions fails cleanly before the stack does.
  Value eval(const Expr& e, Scope& scope) {
    if (eval_depth_ >= kMaxEvalDepth) render_fail("expressions nested deeper than {} (through macro calls too)", kMaxEvalDepth);
    ++eval_depth_;
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{eval_depth_};
    return eval_unchecked(e, scope);
  }

  Value eval_unchecked(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case ExprKind::kConst:
        return e.value;
      case ExprKind::kName: {
        const Value* v = scope.lookup(e.name);
        return v ? *v : Value::undefined(fmt::format("'{}' is undefined", e.name));
      }
      case ExprKind::kList:
      case ExprKind::kTuple: {
        Array items;
        for (const auto& a : e.args) items.push_back(eval(*a, scope));
        return e.kind == ExprKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
      }
      case ExprKind::kDict: {
        Object entries;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value key = eval(*e.args[i], scope);
          if (!key.is_string()) render_fail("dict keys must be strings, not {}", type_name(key));
          Value v = eval(*e.args[i + 1], scope);
          bool replaced = false;
          for (auto& [k, slot] : entries) {
            if (k == key.as_string()) {
              slot = v;
              replaced = true;
            }
          }
          if (!replaced) entries.emplace_back(key.as_string(), std::move(v));
        }
        return Value::dict(std::move(entries));
      }
      case ExprKind::kGetattr:
        return get_attr(eval(*e.args[0], scope), e.name);
      case ExprKind::kGetitem: {
        const Value obj = eval(*e.args[0], scope);
        return get_item(obj, eval(*e.args[1], scope));
      }
      case ExprKind::kSlice: {
        const Value obj = eval(*e.args[0], scope);
        const auto bound = [&](size_t i) { return e.args[i] ? eval(*e.args[i], scope) : Value(); };
        return get_slice(obj, bound(1), bound(2), bound(3));
      }
      case ExprKind::kCall:
        return eval_call(e, scope);
      case ExprKind::kFilter:
      case ExprKind::kTest: {
        const Value operand = eval(*e.args[0], scope);
        Array args;
        for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i], scope));
        if (e.kind == ExprKind::kTest) return Value::boolean(apply_test(e.name, operand, args) != e.negated);
        Kwargs kwargs;
        for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v, scope));
        return apply_filter(e.name, operand, args, kwargs);
      }
      case ExprKind::kNeg:
        return negate(eval(*e.args[0], scope));
      case ExprKind::kPos: {
        Value v = eval(*e.args[0], scope);
        if (v.is_undefined()) undefined_error(v);
        if (!v.is_number()) render_fail("bad operand type for unary +: '{}'", type_name(v));
        return v.kind() == Value::Kind::kBool ? Value::integer(v.as_int()) : v;
      }
      case ExprKind::kNot:
        return Value::boolean(!truthy(eval(*e.args[0], scope)));
      case ExprKind::kAnd: {
        Value a = eval(*e.args[0], scope);
        return truthy(a) ? eval(*e.args[1], scope) : a;
      }
      case ExprKind::kOr: {
        Value a = eval(*e.args[0], scope);
        return truthy(a) ? a : eval(*e.args[1], scope);
      }
      case ExprKind::kCompare: {
        Value left = eval(*e.args[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1], scope);
          if (!compare_op(e.ops[i], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case ExprKind::kCondExpr:
        if (truthy(eval(*e.args[0], scope))) return eval(*e.args[1], scope);
        if (e.args[2]) return eval(*e.args[2], scope);
        return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
      case ExprKind::kBinary: {
        const Value a = eval(*e.args[0], scope);
        return binary_op(e.name, a, eval(*e.args[1], scope));
      }
    }
    render_fail("unknown expression");
  }

  Scope& root_;
  int depth_ = 0;
  int64_t steps_ = 0;  // statements run and loop iterations, against kMaxRenderSteps
  int eval_depth_ = 0;  // evaluations in progress, against kMaxEvalDepth
};

}  // namespace

std::string render(const Template& tpl, const Object& variables) {
  Scope root(nullptr);
  for (const auto& [k, v] : variables) root.set(k, v);
  std::string out;
  Renderer(root).exec(tpl.body, root, out);
  return out;
}

}  // namespace rocket::jinja
