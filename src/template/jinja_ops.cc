#include "template/jinja_ops.h"

#include <cmath>
#include <limits>
#include <optional>

#include "template/jinja_builtins.h"
#include "template/jinja_error.h"
#include "template/jinja_render.h"
#include "template/jinja_text.h"

namespace rocket::jinja {

namespace {

// Python's attribute names of a dict, all of which shadow keys under `.` access. Only some are
// callable from a template (jinja_builtins.h); the rest exist so that `d.update` is not d["update"].
bool is_dict_attribute(std::string_view name) {
  for (const std::string_view a : {"clear", "copy", "fromkeys", "get", "items", "keys", "pop", "popitem", "setdefault",
                                   "update", "values"}) {
    if (a == name) return true;
  }
  return false;
}

std::string object_label(const Value& obj) { return "'" + type_name(obj) + " object'"; }

Value missing_attribute(const Value& obj, std::string_view name) {
  return Value::undefined(fmt::format("{} has no attribute '{}'", object_label(obj), name));
}

// An index into a sequence of `size`, with Python's negative indexing; nullopt when out of range.
std::optional<size_t> normalize_index(int64_t i, size_t size) {
  if (i < 0) i += int64_t(size);
  if (i < 0 || i >= int64_t(size)) return std::nullopt;
  return size_t(i);
}

// Python integers do not overflow; a template that needs more than 64 bits is refused instead.
[[noreturn]] void overflow() { render_fail("integer overflow (more than 64 bits)"); }

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  render_fail("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b));
}

// Concatenations are bounded as repetitions are: doubling a string in a loop reaches any size.
std::string bounded(std::string s) {
  if (int64_t(s.size()) > kMaxRenderBytes) render_fail("string too big: {} bytes, the sandbox allows {}", s.size(), kMaxRenderBytes);
  return s;
}

Value repeat(const Value& seq, int64_t n) {
  // Bounded as the render's strings are (jinja_render.h): "x" * 10**9 would fill the machine.
  const int64_t unit = seq.is_string() ? int64_t(seq.as_string().size()) : int64_t(seq.as_array().size());
  if (n > 0 && unit > 0 && n > kMaxRenderBytes / unit)
    render_fail("repetition too big: {} x {} {}, the sandbox allows {}", unit, n, seq.is_string() ? "bytes" : "items", kMaxRenderBytes);
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value::string(std::move(out));
  }
  Array out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_array().begin(), seq.as_array().end());
  return seq.kind() == Value::Kind::kTuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t py_mod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

std::optional<int64_t> slice_bound(const Value& v) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) {
    render_fail("slice indices must be integers or None, not {}", type_name(v));
  }
  return v.as_int();
}

}  // namespace

void undefined_error(const Value& v) { render_fail("{}", v.undefined_hint()); }

Value get_attr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      undefined_error(obj);
    case Value::Kind::kDict: {
      if (is_dict_attribute(name)) return Value::method(obj, std::string(name));
      const Value* v = obj.find(name);
      return v ? *v : missing_attribute(obj, name);
    }
    case Value::Kind::kNamespace: {
      const Value* v = obj.find(name);
      return v ? *v : missing_attribute(obj, name);
    }
    case Value::Kind::kString:
      return is_method(name) && !is_dict_attribute(name) ? Value::method(obj, std::string(name)) : missing_attribute(obj, name);
    default:
      return missing_attribute(obj, name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      undefined_error(obj);
    case Value::Kind::kDict: {
      if (key.is_string()) {
        if (const Value* v = obj.find(key.as_string())) return *v;
        return get_attr(obj, key.as_string());
      }
      return Value::undefined(fmt::format("{} has no element {}", object_label(obj), repr(key)));
    }
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kString: {
      if (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool) {
        if (obj.is_string()) {
          const std::vector<size_t> offsets = code_point_offsets(obj.as_string());
          if (const auto i = normalize_index(key.as_int(), offsets.size() - 1)) {
            return Value::string(obj.as_string().substr(offsets[*i], offsets[*i + 1] - offsets[*i]));
          }
        } else if (const auto i = normalize_index(key.as_int(), obj.as_array().size())) {
          return obj.as_array()[*i];
        }
        return Value::undefined(fmt::format("{} has no element {}", object_label(obj), key.as_int()));
      }
      if (key.is_string()) return get_attr(obj, key.as_string());
      return Value::undefined(fmt::format("{} has no element {}", object_label(obj), repr(key)));
    }
    default:
      if (key.is_string()) return get_attr(obj, key.as_string());
      return Value::undefined(fmt::format("{} has no element {}", object_label(obj), repr(key)));
  }
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj);
  // Unlike an index, a slice bypasses Jinja2's getitem, so slicing a non-sequence is Python's TypeError.
  if (!obj.is_string() && !obj.is_sequence()) render_fail("'{}' object is not subscriptable", type_name(obj));
  const int64_t step = slice_bound(step_v).value_or(1);
  if (step == 0) render_fail("slice step cannot be zero");
  std::vector<size_t> offsets;
  if (obj.is_string()) offsets = code_point_offsets(obj.as_string());
  const int64_t n = obj.is_string() ? int64_t(offsets.size()) - 1 : int64_t(obj.as_array().size());
  // slice.indices(n): clamp given bounds, defaults depend on the direction.
  const auto clamp = [&](std::optional<int64_t> b, int64_t if_absent) {
    if (!b) return if_absent;
    int64_t v = *b < 0 ? *b + n : *b;
    return step > 0 ? std::clamp<int64_t>(v, 0, n) : std::clamp<int64_t>(v, -1, n - 1);
  };
  const int64_t start = clamp(slice_bound(start_v), step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(slice_bound(stop_v), step > 0 ? n : -1);
  std::string s;
  Array items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (obj.is_string()) {
      s += obj.as_string().substr(offsets[size_t(i)], offsets[size_t(i) + 1] - offsets[size_t(i)]);
    } else {
      items.push_back(obj.as_array()[size_t(i)]);
    }
  }
  if (obj.is_string()) return Value::string(std::move(s));
  return obj.kind() == Value::Kind::kTuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") return Value::string(bounded(to_str(a) + to_str(b)));
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const bool ints = (a.kind() == Value::Kind::kInt || a.kind() == Value::Kind::kBool) &&
                    (b.kind() == Value::Kind::kInt || b.kind() == Value::Kind::kBool);
  const bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value::integer(checked_add(a.as_int(), b.as_int()));
    if (numbers) return Value::floating(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value::string(bounded(a.as_string() + b.as_string()));
    if (a.is_sequence() && a.kind() == b.kind()) {
      if (int64_t(a.as_array().size() + b.as_array().size()) > kMaxRenderBytes) render_fail("list too big");
      Array items = a.as_array();
      items.insert(items.end(), b.as_array().begin(), b.as_array().end());
      return a.kind() == Value::Kind::kTuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    if (a.is_string()) render_fail("can only concatenate str (not \"{}\") to str", type_name(b));
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(checked_sub(a.as_int(), b.as_int()));
    if (numbers) return Value::floating(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(checked_mul(a.as_int(), b.as_int()));
    if (numbers) return Value::floating(a.as_double() * b.as_double());
    const bool b_int = b.kind() == Value::Kind::kInt || b.kind() == Value::Kind::kBool;
    const bool a_int = a.kind() == Value::Kind::kInt || a.kind() == Value::Kind::kBool;
    if ((a.is_string() || a.is_sequence()) && b_int) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_sequence()) && a_int) return repeat(b, a.as_int());
    unsupported(op, a, b);
  }
  if (!numbers) {
    if (op == "%" && a.is_string()) render_fail("printf-style string formatting ('%' on a str) is not supported");
    unsupported(op, a, b);
  }
  if (op == "/") {
    if (b.as_double() == 0.0) render_fail("division by zero");
    return Value::floating(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0.0) render_fail("{} by zero", op == "//" ? "integer division" : "modulo");
    if (ints) return Value::integer(op == "//" ? floor_div(a.as_int(), b.as_int()) : py_mod(a.as_int(), b.as_int()));
    const double x = a.as_double(), y = b.as_double();
    if (op == "//") return Value::floating(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
    return Value::floating(m);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t r = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0;) {
        if (e & 1) r = checked_mul(r, base);
        e >>= 1;
        if (e > 0) base = checked_mul(base, base);
      }
      return Value::integer(r);
    }
    if (a.as_double() == 0.0 && b.as_double() < 0) render_fail("0.0 cannot be raised to a negative power");
    return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  render_fail("unknown operator '{}'", op);
}

Value negate(const Value& a) {
  if (a.is_undefined()) undefined_error(a);
  if (a.kind() == Value::Kind::kFloat) return Value::floating(-a.as_double());
  if (a.is_number()) return Value::integer(checked_sub(0, a.as_int()));
  render_fail("bad operand type for unary -: '{}'", type_name(a));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) render_fail("'in <string>' requires string as left operand, not {}", type_name(item));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& v : container.as_array()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (item.kind() == Value::Kind::kList || item.kind() == Value::Kind::kDict || item.kind() == Value::Kind::kNamespace) {
        render_fail("unhashable type: '{}'", type_name(item));
      }
      return item.is_string() && container.find(item.as_string()) != nullptr;
    default:
      render_fail("argument of type '{}' is not iterable", type_name(container));
  }
}

bool compare_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const int c = compare(a, b);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  if (op == ">=") return c >= 0;
  render_fail("unknown comparison '{}'", op);
}

size_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return code_point_count(v.as_string());
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return v.as_array().size();
    case Value::Kind::kDict:
      return v.as_dict().size();
    default:
      render_fail("object of type '{}' has no len()", type_name(v));
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kString: {
      std::vector<Value> out;
      const std::vector<size_t> offsets = code_point_offsets(v.as_string());
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        out.push_back(Value::string(v.as_string().substr(offsets[i], offsets[i + 1] - offsets[i])));
      }
      return out;
    }
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return v.as_array();
    case Value::Kind::kDict: {
      std::vector<Value> out;
      for (const auto& [k, unused] : v.as_dict()) out.push_back(Value::string(k));
      return out;
    }
    default:
      render_fail("'{}' object is not iterable", type_name(v));
  }
}

}  // namespace rocket::jinja
