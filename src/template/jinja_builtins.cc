#include "template/jinja_builtins.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <ctime>
#include <initializer_list>
#include <optional>

#include "template/jinja_ops.h"
#include "template/jinja_text.h"

namespace rocket::jinja {

namespace {

constexpr std::string_view kFilters[] = {
    "abs",  "capitalize", "count",   "d",       "default", "first",  "float",      "indent", "int",
    "items", "join",      "last",    "length",  "list",    "lower",  "map",        "reject", "rejectattr",
    "replace", "reverse", "safe",    "select",  "selectattr", "string", "title",   "tojson", "trim",
    "upper"};
constexpr std::string_view kTests[] = {
    "boolean", "callable", "defined", "even", "false", "float",   "integer",   "iterable", "lower",
    "mapping", "none",     "number",  "odd",  "sequence", "string", "true",    "undefined", "upper"};
// Tests that compare the value with one argument.
constexpr std::string_view kArgTests[] = {
    "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=",
    "gt",          "greaterthan", ">", "ge", ">=", "in", "sameas"};
constexpr std::string_view kStrMethods[] = {
    "capitalize", "count", "endswith", "find", "join", "lower", "lstrip", "replace", "rsplit",
    "rstrip",     "split", "startswith", "strip", "title", "upper"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values"};
constexpr std::string_view kGlobals[] = {"dict", "namespace", "raise_exception", "range", "strftime_now"};

template <size_t N>
bool among(std::string_view name, const std::string_view (&names)[N]) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

// jinja2's sandbox refuses ranges longer than this (MAX_RANGE), so templates cannot make huge lists.
constexpr int64_t kMaxRange = 100000;

// Python's binding of call arguments to named parameters: positionals in order, then keywords by
// name. An absent optional parameter stays nullopt.
std::vector<std::optional<Value>> bind(std::string_view what, std::initializer_list<std::string_view> params,
                                       std::span<const Value> args, const Kwargs& kwargs) {
  if (args.size() > params.size()) {
    render_fail("{}() takes at most {} argument(s) ({} given)", what, params.size(), args.size());
  }
  std::vector<std::optional<Value>> out(params.size());
  for (size_t i = 0; i < args.size(); ++i) out[i] = args[i];
  for (const auto& [key, value] : kwargs) {
    const auto it = std::find(params.begin(), params.end(), key);
    if (it == params.end()) render_fail("{}() got an unexpected keyword argument '{}'", what, key);
    auto& slot = out[size_t(it - params.begin())];
    if (slot) render_fail("{}() got multiple values for argument '{}'", what, key);
    slot = value;
  }
  return out;
}

void no_kwargs(std::string_view what, const Kwargs& kwargs) {
  if (!kwargs.empty()) render_fail("{}() got an unexpected keyword argument '{}'", what, kwargs.front().first);
}

const Value& required(std::string_view what, const std::optional<Value>& v, std::string_view param) {
  if (!v) render_fail("{}() missing required argument '{}'", what, param);
  return *v;
}

// A parameter that is None or absent is nullopt; otherwise it must be a str.
std::optional<std::string> optional_str(std::string_view what, const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) render_fail("{}() argument must be str or None, not {}", what, type_name(*v));
  return v->as_string();
}

const std::string& str_arg(std::string_view what, const Value& v) {
  if (!v.is_string()) render_fail("{}() argument must be str, not {}", what, type_name(v));
  return v.as_string();
}

int64_t int_arg(std::string_view what, const Value& v) {
  if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) {
    render_fail("{}() argument must be an integer, not {}", what, type_name(v));
  }
  return v.as_int();
}

Value items_of(const Object& entries) {
  Array out;
  for (const auto& [k, v] : entries) out.push_back(Value::tuple({Value::string(k), v}));
  return Value::list(std::move(out));
}

// Python's str.splitlines() boundaries, which the `indent` filter splits on.
std::vector<std::string> splitlines(std::string_view s) {
  std::vector<std::string> lines;
  const std::vector<size_t> offsets = code_point_offsets(s);
  const std::vector<char32_t> cps = decode_utf8(s);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool boundary = c == U'\n' || c == U'\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                          c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!boundary) continue;
    lines.emplace_back(s.substr(offsets[start], offsets[i] - offsets[start]));
    if (c == U'\r' && i + 1 < cps.size() && cps[i + 1] == U'\n') ++i;
    start = i + 1;
  }
  if (start < cps.size()) lines.emplace_back(s.substr(offsets[start]));
  return lines;
}

// Python's float(str): surrounding whitespace allowed, underscores between digits, inf and nan.
std::optional<double> parse_float(const std::string& text) {
  std::string s;
  for (char c : py_strip(text, StripSide::kBoth, nullptr)) {
    if (c != '_') s += c;
  }
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_int(const std::string& text, int64_t base) {
  std::string s;
  for (char c : py_strip(text, StripSide::kBoth, nullptr)) {
    if (c != '_') s += c;
  }
  if (s.empty() || base < 2 || base > 36) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, int(base));
  if (end != s.c_str() + s.size() || errno == ERANGE || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
  return int64_t(v);
}

// Python's str.islower()/isupper(): at least one cased character, and none of the other case.
bool case_test(const std::string& s, bool lower) {
  bool cased = false;
  for (const char32_t cp : decode_utf8(s)) {
    const auto cat = utf8proc_category(utf8proc_int32_t(cp));
    const bool is_lower = cat == UTF8PROC_CATEGORY_LL;
    const bool is_upper = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT;
    if (lower ? is_upper : is_lower) return false;
    if (lower ? is_lower : is_upper) cased = true;
  }
  return cased;
}

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then index 0, each as a subscript.
Value attribute_path(const Value& item, const std::string& path) {
  static const std::string kDot = ".";
  Value v = item;
  for (const std::string& part : py_split(path, &kDot, -1)) {
    // An index past int64 indexes nothing: looked up as a string, it finds no item either.
    int64_t index = 0;
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                        std::from_chars(part.data(), part.data() + part.size(), index).ec == std::errc();
    v = get_item(v, digits ? Value::integer(index) : Value::string(part));
  }
  return v;
}

// jinja2's `title` filter, which is not str.title(): words start only after whitespace or one of
// -({[<, and each word is its first character upper-cased plus the rest lower-cased.
std::string title_filter(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (const char32_t cp : decode_utf8(s)) {
    const bool separator = is_py_space(cp) || cp == U'-' || cp == U'(' || cp == U'{' || cp == U'[' || cp == U'<';
    std::string c;
    append_utf8(c, cp);
    out += separator ? c : word_start ? py_upper(c) : py_lower(c);
    word_start = separator;
  }
  return out;
}

Value tojson(const Value& operand, std::span<const Value> args, const Kwargs& kwargs) {
  // HF transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  const auto p = bind("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}, args, kwargs);
  JsonFormat format;
  format.ensure_ascii = p[0] && truthy(*p[0]);
  if (p[1] && !p[1]->is_none()) {
    if (p[1]->is_string()) {
      format.indent = p[1]->as_string();
    } else {
      format.indent = std::string(size_t(std::max<int64_t>(0, int_arg("tojson", *p[1]))), ' ');
    }
  }
  if (p[2] && !p[2]->is_none()) {
    if (!p[2]->is_sequence() || p[2]->as_array().size() != 2 || !p[2]->as_array()[0].is_string() ||
        !p[2]->as_array()[1].is_string()) {
      render_fail("tojson() separators must be a pair of strings");
    }
    format.item_sep = p[2]->as_array()[0].as_string();
    format.key_sep = p[2]->as_array()[1].as_string();
  }
  format.sort_keys = p[3] && truthy(*p[3]);
  return Value::string(to_json(operand, format));
}

Value indent(const Value& operand, std::span<const Value> args, const Kwargs& kwargs) {
  const auto p = bind("indent", {"width", "first", "blank"}, args, kwargs);
  std::string pad = "    ";
  if (p[0]) pad = p[0]->is_string() ? p[0]->as_string() : std::string(size_t(std::max<int64_t>(0, int_arg("indent", *p[0]))), ' ');
  const bool first = p[1] && truthy(*p[1]);
  const bool blank = p[2] && truthy(*p[2]);
  // jinja2 appends a newline first so that splitlines() keeps a trailing empty line.
  const std::vector<std::string> lines = splitlines(to_str(operand) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    const bool pad_line = blank ? i > 0 : (i > 0 && !lines[i].empty());
    if (pad_line) out += pad;
    out += lines[i];
  }
  if (first) out = pad + out;
  return Value::string(std::move(out));
}

Value select_items(std::string_view filter, const Value& operand, std::span<const Value> args, const Kwargs& kwargs) {
  no_kwargs(filter, kwargs);
  const bool by_attr = filter == "selectattr" || filter == "rejectattr";
  const bool keep_if = filter == "select" || filter == "selectattr";
  if (by_attr && args.empty()) render_fail("{}() missing required argument 'attribute'", filter);
  const size_t test_at = by_attr ? 1 : 0;
  std::optional<std::string> test;
  if (args.size() > test_at) {
    test = str_arg(filter, args[test_at]);
    if (!is_test(*test)) render_fail("{}(): no test named '{}'", filter, *test);
  }
  const std::span<const Value> test_args = args.size() > test_at + 1 ? args.subspan(test_at + 1) : std::span<const Value>{};
  Array out;
  for (const Value& item : iterate(operand)) {
    const Value probe = by_attr ? attribute_path(item, str_arg(filter, args[0])) : item;
    const bool pass = test ? apply_test(*test, probe, test_args) : truthy(probe);
    if (pass == keep_if) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map_items(const Value& operand, std::span<const Value> args, const Kwargs& kwargs) {
  Array out;
  if (args.empty()) {
    const auto p = bind("map", {"attribute", "default"}, args, kwargs);
    const std::string path = str_arg("map", required("map", p[0], "attribute"));
    for (const Value& item : iterate(operand)) {
      Value v = attribute_path(item, path);
      if (v.is_undefined() && p[1]) v = *p[1];
      out.push_back(std::move(v));
    }
    return Value::list(std::move(out));
  }
  const std::string& filter = str_arg("map", args[0]);
  if (!is_filter(filter) || filter == "map") render_fail("map(): no filter named '{}'", filter);
  for (const Value& item : iterate(operand)) out.push_back(apply_filter(filter, item, args.subspan(1), kwargs));
  return Value::list(std::move(out));
}

Value to_int(const Value& operand, std::span<const Value> args, const Kwargs& kwargs) {
  if (operand.is_undefined()) undefined_error(operand);
  const auto p = bind("int", {"default", "base"}, args, kwargs);
  const Value fallback = p[0].value_or(Value::integer(0));
  const int64_t base = p[1] ? int_arg("int", *p[1]) : 10;
  if (operand.kind() == Value::Kind::kInt || operand.kind() == Value::Kind::kBool) return Value::integer(operand.as_int());
  if (operand.kind() == Value::Kind::kFloat) {
    const double d = operand.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(int64_t(d));
  }
  if (operand.is_string()) {
    if (const auto i = parse_int(operand.as_string(), base)) return Value::integer(*i);
    if (const auto d = parse_float(operand.as_string()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) {
      return Value::integer(int64_t(*d));
    }
  }
  return fallback;
}

Value to_float(const Value& operand, std::span<const Value> args, const Kwargs& kwargs) {
  if (operand.is_undefined()) undefined_error(operand);
  const auto p = bind("float", {"default"}, args, kwargs);
  const Value fallback = p[0].value_or(Value::floating(0.0));
  if (operand.is_number()) return Value::floating(operand.as_double());
  if (operand.is_string()) {
    if (const auto d = parse_float(operand.as_string())) return Value::floating(*d);
  }
  return fallback;
}

Value reversed(const Value& operand) {
  if (operand.is_string()) {
    const std::vector<char32_t> cps = decode_utf8(operand.as_string());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) append_utf8(out, *it);
    return Value::string(std::move(out));
  }
  // jinja2 returns an iterator here; a list iterates and tests the same and prints usefully.
  std::vector<Value> items = iterate(operand);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

// str.startswith / endswith with an optional code point range.
Value affix_test(const Value& receiver, std::string_view name, std::span<const Value> args, const Kwargs& kwargs) {
  no_kwargs(name, kwargs);
  if (args.empty() || args.size() > 3) render_fail("{}() takes from 1 to 3 arguments ({} given)", name, args.size());
  const Value range = args.size() > 1 ? get_slice(receiver, args[1], args.size() > 2 ? args[2] : Value(), Value()) : receiver;
  const std::string& s = range.as_string();
  std::vector<Value> candidates;
  if (args[0].kind() == Value::Kind::kTuple || args[0].kind() == Value::Kind::kList) {
    candidates = args[0].as_array();
  } else {
    candidates = {args[0]};
  }
  for (const Value& c : candidates) {
    const std::string& affix = str_arg(name, c);
    const bool hit = affix.size() <= s.size() &&
                     (name == "startswith" ? s.compare(0, affix.size(), affix) == 0
                                           : s.compare(s.size() - affix.size(), affix.size(), affix) == 0);
    if (hit) return Value::boolean(true);
  }
  return Value::boolean(false);
}

Value str_method(const Value& receiver, std::string_view name, std::span<const Value> args, const Kwargs& kwargs) {
  const std::string& s = receiver.as_string();
  if (name == "startswith" || name == "endswith") return affix_test(receiver, name, args, kwargs);
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto p = bind(name, {"chars"}, args, kwargs);
    const std::optional<std::string> chars = optional_str(name, p[0]);
    const StripSide side = name == "strip" ? StripSide::kBoth : name == "lstrip" ? StripSide::kLeft : StripSide::kRight;
    return Value::string(py_strip(s, side, chars ? &*chars : nullptr));
  }
  if (name == "split" || name == "rsplit") {
    const auto p = bind(name, {"sep", "maxsplit"}, args, kwargs);
    const std::optional<std::string> sep = optional_str(name, p[0]);
    const int64_t maxsplit = p[1] ? int_arg(name, *p[1]) : -1;
    const auto parts = name == "split" ? py_split(s, sep ? &*sep : nullptr, maxsplit) : py_rsplit(s, sep ? &*sep : nullptr, maxsplit);
    Array out;
    for (const auto& part : parts) out.push_back(Value::string(part));
    return Value::list(std::move(out));
  }
  if (name == "replace") {
    const auto p = bind(name, {"old", "new", "count"}, args, kwargs);
    const int64_t count = p[2] ? int_arg(name, *p[2]) : -1;
    return Value::string(py_replace(s, str_arg(name, required(name, p[0], "old")), str_arg(name, required(name, p[1], "new")), count));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    bind(name, {}, args, kwargs);
    if (name == "upper") return Value::string(py_upper(s));
    if (name == "lower") return Value::string(py_lower(s));
    if (name == "title") return Value::string(py_title(s));
    return Value::string(py_capitalize(s));
  }
  if (name == "join") {
    const auto p = bind(name, {"iterable"}, args, kwargs);
    std::string out;
    size_t i = 0;
    for (const Value& item : iterate(required(name, p[0], "iterable"))) {
      if (!item.is_string()) render_fail("sequence item {}: expected str instance, {} found", i, type_name(item));
      if (i++) out += s;
      out += item.as_string();
    }
    return Value::string(std::move(out));
  }
  if (name == "find" || name == "count") {
    const auto p = bind(name, {"sub"}, args, kwargs);
    const std::string& sub = str_arg(name, required(name, p[0], "sub"));
    if (name == "find") {
      const size_t at = s.find(sub);
      return Value::integer(at == std::string::npos ? -1 : int64_t(code_point_count(std::string_view(s).substr(0, at))));
    }
    if (sub.empty()) return Value::integer(int64_t(code_point_count(s)) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  render_fail("'str object' has no attribute '{}'", name);
}

Value dict_method(const Value& receiver, std::string_view name, std::span<const Value> args, const Kwargs& kwargs) {
  if (name == "get") {
    const auto p = bind(name, {"key", "default"}, args, kwargs);
    const Value& key = required(name, p[0], "key");
    const Value* v = key.is_string() ? receiver.find(key.as_string()) : nullptr;
    return v ? *v : p[1].value_or(Value::none());
  }
  bind(name, {}, args, kwargs);
  if (name == "items") return items_of(receiver.as_dict());
  Array out;
  for (const auto& [k, v] : receiver.as_dict()) out.push_back(name == "keys" ? Value::string(k) : v);
  if (name == "keys" || name == "values") return Value::list(std::move(out));
  render_fail("'dict object' has no attribute '{}'", name);
}

}  // namespace

bool is_filter(std::string_view name) { return among(name, kFilters); }
bool is_test(std::string_view name) { return among(name, kTests) || among(name, kArgTests); }
size_t test_arity(std::string_view name) { return among(name, kArgTests) ? 1 : 0; }
bool is_method(std::string_view name) { return among(name, kStrMethods) || among(name, kDictMethods); }
bool is_global_function(std::string_view name) { return among(name, kGlobals); }

Value apply_filter(std::string_view name, const Value& operand, std::span<const Value> args, const Kwargs& kwargs) {
  if (name == "tojson") return tojson(operand, args, kwargs);
  if (name == "default" || name == "d") {
    const auto p = bind(name, {"default_value", "boolean"}, args, kwargs);
    const bool use_default = operand.is_undefined() || (p[1] && truthy(*p[1]) && !truthy(operand));
    return use_default ? p[0].value_or(Value::string("")) : operand;
  }
  if (name == "map") return map_items(operand, args, kwargs);
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    return select_items(name, operand, args, kwargs);
  }
  if (name == "int") return to_int(operand, args, kwargs);
  if (name == "float") return to_float(operand, args, kwargs);
  if (name == "indent") return indent(operand, args, kwargs);
  if (name == "join") {
    const auto p = bind(name, {"d", "attribute"}, args, kwargs);
    const std::string sep = p[0] ? to_str(*p[0]) : "";
    const std::optional<std::string> attr = p[1] && !p[1]->is_none() ? std::optional(to_str(*p[1])) : std::nullopt;
    std::string out;
    size_t i = 0;
    for (const Value& item : iterate(operand)) {
      if (i++) out += sep;
      out += to_str(attr ? attribute_path(item, *attr) : item);
    }
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    const auto p = bind(name, {"old", "new", "count"}, args, kwargs);
    const int64_t count = p[2] && !p[2]->is_none() ? int_arg(name, *p[2]) : -1;
    return Value::string(py_replace(to_str(operand), to_str(required(name, p[0], "old")), to_str(required(name, p[1], "new")), count));
  }
  if (name == "trim") {
    const auto p = bind(name, {"chars"}, args, kwargs);
    const std::optional<std::string> chars = optional_str(name, p[0]);
    return Value::string(py_strip(to_str(operand), StripSide::kBoth, chars ? &*chars : nullptr));
  }
  // The rest take no arguments.
  bind(name, {}, args, kwargs);
  if (name == "length" || name == "count") return Value::integer(int64_t(py_len(operand)));
  if (name == "string" || name == "safe") return Value::string(to_str(operand));
  if (name == "upper") return Value::string(py_upper(to_str(operand)));
  if (name == "lower") return Value::string(py_lower(to_str(operand)));
  if (name == "title") return Value::string(title_filter(to_str(operand)));
  if (name == "capitalize") return Value::string(py_capitalize(to_str(operand)));
  if (name == "list") return Value::list(iterate(operand));
  if (name == "reverse") return reversed(operand);
  if (name == "first" || name == "last") {
    const std::vector<Value> items = iterate(operand);
    if (items.empty()) return Value::undefined(fmt::format("No {} item, sequence was empty.", name));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "items") {
    if (operand.is_undefined()) return Value::list({});
    if (!operand.is_dict()) render_fail("Can only get item pairs from a mapping.");
    return items_of(operand.as_dict());
  }
  if (name == "abs") {
    if (operand.kind() == Value::Kind::kFloat) return Value::floating(std::fabs(operand.as_double()));
    if (operand.is_number()) return Value::integer(operand.as_int() < 0 ? negate(operand).as_int() : operand.as_int());
    render_fail("bad operand type for abs(): '{}'", type_name(operand));
  }
  render_fail("no filter named '{}'", name);
}

bool apply_test(std::string_view name, const Value& v, std::span<const Value> args) {
  if (args.size() != test_arity(name)) {
    render_fail("test '{}' takes {} argument(s), {} given", name, test_arity(name), args.size());
  }
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.as_bool();
  if (name == "false") return v.kind() == K::kBool && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  // Undefined is iterable (empty) and a sequence (it has len() and __getitem__) to Jinja2.
  if (name == "iterable" || name == "sequence") return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
  // Undefined is callable to Jinja2 (calling it raises the undefined error).
  if (name == "callable") return v.kind() == K::kMacro || v.kind() == K::kMethod || v.is_undefined();
  if (name == "odd") return equals(binary_op("%", v, Value::integer(2)), Value::integer(1));
  if (name == "even") return equals(binary_op("%", v, Value::integer(2)), Value::integer(0));
  if (name == "lower" || name == "upper") return case_test(to_str(v), name == "lower");
  const Value& arg = args[0];
  if (name == "divisibleby") return !truthy(binary_op("%", v, arg));
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg);
  if (name == "ne" || name == "!=") return !equals(v, arg);
  if (name == "lt" || name == "lessthan" || name == "<") return compare_op("<", v, arg);
  if (name == "le" || name == "<=") return compare_op("<=", v, arg);
  if (name == "gt" || name == "greaterthan" || name == ">") return compare_op(">", v, arg);
  if (name == "ge" || name == ">=") return compare_op(">=", v, arg);
  if (name == "in") return contains(arg, v);
  if (name == "sameas") {
    // Python identity; meaningful in templates for none, true and false (and shared namespaces).
    if (v.kind() != arg.kind()) return false;
    if (v.is_none()) return true;
    if (v.kind() == K::kBool) return v.as_bool() == arg.as_bool();
    if (v.kind() == K::kNamespace) return &v.as_namespace() == &arg.as_namespace();
    return false;
  }
  render_fail("no test named '{}'", name);
}

Value call_method(const Value& receiver, std::string_view name, std::span<const Value> args, const Kwargs& kwargs) {
  if (receiver.is_undefined()) undefined_error(receiver);
  if (receiver.is_string() && among(name, kStrMethods)) return str_method(receiver, name, args, kwargs);
  if (receiver.is_dict() && among(name, kDictMethods)) return dict_method(receiver, name, args, kwargs);
  if (receiver.is_sequence() && name == "count") {
    const auto p = bind(name, {"value"}, args, kwargs);
    const Value& needle = required(name, p[0], "value");
    return Value::integer(std::count_if(receiver.as_array().begin(), receiver.as_array().end(),
                                        [&](const Value& v) { return equals(v, needle); }));
  }
  render_fail("'{} object' has no attribute '{}'", type_name(receiver), name);
}

Value call_global(std::string_view name, std::span<const Value> args, const Kwargs& kwargs) {
  if (name == "raise_exception") {
    const auto p = bind(name, {"message"}, args, kwargs);
    throw TemplateException(to_str(required(name, p[0], "message")));
  }
  if (name == "namespace" || name == "dict") {
    if (args.size() > 1) render_fail("{}() expected at most 1 positional argument, got {}", name, args.size());
    Object entries;
    const auto put = [&](const std::string& k, const Value& v) {
      for (auto& e : entries) {
        if (e.first == k) {
          e.second = v;
          return;
        }
      }
      entries.emplace_back(k, v);
    };
    if (!args.empty()) {
      if (!args[0].is_dict()) render_fail("{}() positional argument must be a mapping, not {}", name, type_name(args[0]));
      for (const auto& [k, v] : args[0].as_dict()) put(k, v);
    }
    for (const auto& [k, v] : kwargs) put(k, v);
    return name == "namespace" ? Value::ns(std::move(entries)) : Value::dict(std::move(entries));
  }
  if (name == "range") {
    no_kwargs(name, kwargs);
    if (args.empty() || args.size() > 3) render_fail("range expected 1 to 3 arguments, got {}", args.size());
    int64_t start = 0, stop, step = 1;
    if (args.size() == 1) {
      stop = int_arg(name, args[0]);
    } else {
      start = int_arg(name, args[0]);
      stop = int_arg(name, args[1]);
      if (args.size() == 3) step = int_arg(name, args[2]);
    }
    if (step == 0) render_fail("range() arg 3 must not be zero");
    const int64_t span = step > 0 ? stop - start : start - stop;
    const int64_t count = span <= 0 ? 0 : (span + std::abs(step) - 1) / std::abs(step);
    if (count > kMaxRange) render_fail("range too big: {} items, the sandbox allows {}", count, kMaxRange);
    Array out;
    for (int64_t i = 0; i < count; ++i) out.push_back(Value::integer(start + i * step));
    return Value::list(std::move(out));
  }
  if (name == "strftime_now") {
    const auto p = bind(name, {"format"}, args, kwargs);
    const std::string& format = str_arg(name, required(name, p[0], "format"));
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[512];
    const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &local);
    return Value::string(std::string(buf, n));
  }
  render_fail("no function named '{}'", name);
}

}  // namespace rocket::jinja
