#include "template/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "template/jinja_ast.h"
#include "template/jinja_error.h"
#include "template/jinja_text.h"

namespace rocket::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.data_ = std::move(hint);
  return v;
}

std::string Value::undefined_hint() const {
  const std::string* hint = std::get_if<std::string>(&data_);
  return hint && !hint->empty() ? *hint : "value is undefined";
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.data_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.data_ = i;
  return v;
}

Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.data_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.data_ = std::move(s);
  return v;
}

Value Value::list(Array items) {
  Value v;
  v.kind_ = Kind::kList;
  v.data_ = std::shared_ptr<const Array>(std::make_shared<Array>(std::move(items)));
  return v;
}

Value Value::tuple(Array items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::dict(Object entries) {
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::shared_ptr<const Object>(std::make_shared<Object>(std::move(entries)));
  return v;
}

Value Value::ns(Object attrs) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.data_ = std::make_shared<Namespace>(Namespace{std::move(attrs)});
  return v;
}

Value Value::macro(const Stmt* definition) {
  Value v;
  v.kind_ = Kind::kMacro;
  v.data_ = definition;
  return v;
}

Value Value::method(Value receiver, std::string name) {
  Value v;
  v.kind_ = Kind::kMethod;
  v.data_ = std::shared_ptr<const BoundMethod>(std::make_shared<BoundMethod>(BoundMethod{std::move(receiver), std::move(name)}));
  return v;
}

int64_t Value::as_int() const { return kind_ == Kind::kBool ? int64_t(as_bool()) : std::get<int64_t>(data_); }

double Value::as_double() const { return kind_ == Kind::kFloat ? std::get<double>(data_) : double(as_int()); }

const Value* Value::find(std::string_view key) const {
  const Object* entries = kind_ == Kind::kDict ? &as_dict() : kind_ == Kind::kNamespace ? &as_namespace().attrs : nullptr;
  if (!entries) return nullptr;
  for (const auto& [k, v] : *entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u <= uint64_t(std::numeric_limits<int64_t>::max()) ? Value::integer(int64_t(u)) : Value::floating(double(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object entries;
      entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) entries.emplace_back(k, from_json(e));
      return Value::dict(std::move(entries));
    }
    default:
      render_fail("a {} JSON value cannot be given to a template", j.type_name());
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return "list";
    case Value::Kind::kTuple: return "tuple";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kMacro: return "Macro";
    case Value::Kind::kMethod: return "builtin_function_or_method";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_double() != 0.0;
    case Value::Kind::kString:
      return !v.as_string().empty();
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return !v.as_array().empty();
    case Value::Kind::kDict:
      return !v.as_dict().empty();
    default:
      return true;
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const Array& x = a.as_array();
      const Array& y = b.as_array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [k, v] : a.as_dict()) {
        const Value* other = b.find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.as_namespace() == &b.as_namespace();
    case Value::Kind::kMacro:
      return a.as_macro() == b.as_macro();
    default:
      return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    // Byte order of UTF-8 is code point order, which is Python's string order.
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_sequence() && a.kind() == b.kind()) {
    const Array& x = a.as_array();
    const Array& y = b.as_array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  render_fail("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b));
}

namespace {

std::string object_repr(const Object& entries) {
  std::string out = "{";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) out += ", ";
    out += py_str_repr(entries[i].first) + ": " + repr(entries[i].second);
  }
  return out + "}";
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (const char32_t cp : decode_utf8(s)) {
    switch (cp) {
      case U'"': out += "\\\""; break;
      case U'\\': out += "\\\\"; break;
      case U'\n': out += "\\n"; break;
      case U'\r': out += "\\r"; break;
      case U'\t': out += "\\t"; break;
      case U'\b': out += "\\b"; break;
      case U'\f': out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
          if (cp >= 0x10000) {
            // Astral code points as a UTF-16 surrogate pair, as json.dumps writes them.
            const uint32_t v = uint32_t(cp) - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            out += fmt::format("\\u{:04x}", uint32_t(cp));
          }
        } else {
          append_utf8(out, cp);
        }
    }
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, const JsonFormat& format, size_t depth) {
  const std::string item_sep = format.item_sep.value_or(format.indent ? "," : ", ");
  const std::string key_sep = format.key_sep.value_or(": ");
  // Newline plus indentation for `level`, or nothing on one line.
  const auto newline = [&](size_t level) {
    if (!format.indent) return;
    out += '\n';
    for (size_t i = 0; i < level; ++i) out += *format.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : py_float_repr(d);
      return;
    }
    case Value::Kind::kString:
      json_string(out, v.as_string(), format.ensure_ascii);
      return;
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const Array& items = v.as_array();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_value(out, items[i], format, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      const Object& entries = v.as_dict();
      if (entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> order;
      for (const auto& e : entries) order.push_back(&e);
      if (format.sort_keys) {
        std::stable_sort(order.begin(), order.end(), [](auto* x, auto* y) { return x->first < y->first; });
      }
      out += '{';
      for (size_t i = 0; i < order.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_string(out, order[i]->first, format.ensure_ascii);
        out += key_sep;
        json_value(out, order[i]->second, format, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      render_fail("Object of type {} is not JSON serializable", type_name(v));
  }
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kString:
      return py_str_repr(v.as_string());
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const bool tuple = v.kind() == Value::Kind::kTuple;
      const Array& items = v.as_array();
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += repr(items[i]);
      }
      if (tuple && items.size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Value::Kind::kDict:
      return object_repr(v.as_dict());
    case Value::Kind::kNamespace:
      return "<Namespace " + object_repr(v.as_namespace().attrs) + ">";
    case Value::Kind::kMacro:
      return fmt::format("<Macro '{}'>", v.as_macro()->name);
    case Value::Kind::kMethod:
      // Python would print an object address, which no rendering should depend on.
      render_fail("cannot print the method '{}' of a {}; call it", v.as_method().name, type_name(v.as_method().receiver));
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return py_float_repr(v.as_double());
    case Value::Kind::kString:
      return v.as_string();
    default:
      return repr(v);
  }
}

std::string to_json(const Value& v, const JsonFormat& format) {
  std::string out;
  json_value(out, v, format, 0);
  return out;
}

}  // namespace rocket::jinja
