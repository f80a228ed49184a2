// Runtime values of the chat-template engine, with Python's semantics for what templates observe:
// truthiness, ==, <, str() (what {{ }} prints) and json.dumps (what `tojson` prints).
//
// A value is JSON (none, bool, int, float, str, list, dict) plus the kinds templates make themselves:
// Undefined (a missing variable, key or attribute), tuple, namespace (the one mutable kind), macro and
// bound method. Lists and dicts are immutable once built (HF renders in Jinja's immutable sandbox), so
// they are shared, never copied; a namespace is shared by reference, as in Python. Dicts keep
// insertion order and string keys only, which is all JSON can give a template.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace rocket::jinja {

struct Stmt;
class Value;

using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;

// jinja2's namespace(): attributes set with {% set ns.attr = ... %} survive loop scopes.
struct Namespace {
  Object attrs;
};

// A method looked up without being called (`d.items`); only calls do anything with it.
struct BoundMethod;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace, kMacro, kMethod };

  Value() = default;  // Undefined
  // `hint` says what was missing ("'dict object' has no attribute 'content'"), for the error raised
  // when the template uses the value as more than a falsy, empty, printable-as-"" thing.
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value floating(double v);
  static Value string(std::string v);
  static Value list(Array items);
  static Value tuple(Array items);
  static Value dict(Object entries);
  static Value ns(Object attrs);
  static Value macro(const Stmt* definition);
  static Value method(Value receiver, std::string name);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_int() const { return kind_ == Kind::kInt; }
  // list or tuple
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  // int, float or bool: Python's numbers (bool is an int subclass).
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;  // REQUIRES: kInt or kBool
  double as_double() const;  // REQUIRES: is_number()
  const std::string& as_string() const { return std::get<std::string>(data_); }
  std::string undefined_hint() const;  // REQUIRES: is_undefined()
  const Array& as_array() const { return *std::get<std::shared_ptr<const Array>>(data_); }
  const Object& as_dict() const { return *std::get<std::shared_ptr<const Object>>(data_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  const Stmt* as_macro() const { return std::get<const Stmt*>(data_); }
  const BoundMethod& as_method() const { return *std::get<std::shared_ptr<const BoundMethod>>(data_); }

  // Key of a dict or attribute of a namespace; nullptr when absent or when this is neither.
  const Value* find(std::string_view key) const;

 private:
  Kind kind_ = Kind::kUndefined;
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<const Array>,
               std::shared_ptr<const Object>, std::shared_ptr<Namespace>, const Stmt*, std::shared_ptr<const BoundMethod>>
      data_;
};

struct BoundMethod {
  Value receiver;
  std::string name;
};

// JSON to values: objects keep their key order, integers beyond int64 become floats.
Value from_json(const nlohmann::ordered_json& j);

// Python's type name ("str", "int", "list", "dict", "NoneType", "Undefined", ...), for error messages.
std::string type_name(const Value& v);

bool truthy(const Value& v);
// Python ==: numbers across int/float/bool, deep for lists, tuples and dicts, identity for namespaces.
bool equals(const Value& a, const Value& b);
// Python's ordering (<0, 0, >0) for numbers, strings (code point order) and same-kind sequences;
// RenderError for anything else, as Python's TypeError.
int compare(const Value& a, const Value& b);

// Python's str(): what {{ value }} prints. Undefined prints as "", none as "None", booleans as
// "True"/"False", containers as their Python repr.
std::string to_str(const Value& v);
std::string repr(const Value& v);

// json.dumps(v, ensure_ascii, indent, separators, sort_keys), which is HF transformers' `tojson`
// (not Jinja's own, which would HTML-escape). `indent` unset means one line; item_sep/key_sep unset
// take json.dumps' defaults (", " or "," with an indent, and ": ").
struct JsonFormat {
  std::optional<std::string> indent;
  std::optional<std::string> item_sep;
  std::optional<std::string> key_sep;
  bool ensure_ascii = false;
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonFormat& format);

}  // namespace rocket::jinja
