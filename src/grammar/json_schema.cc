#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "grammar/fragments.h"
#include "grammar/regex.h"

namespace rocket::grammar {

namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string, std::less<>> kAnnotations = {"description", "title", "default", "examples",
                                                         "$comment", "$schema", "$id"};
const std::set<std::string, std::less<>> kKeywords = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength",
    "maxLength", "pattern", "format", "enum", "const", "anyOf", "$ref", "$defs", "definitions"};

// Regexes of the formats we write (their canonical, always-valid forms: days up to 28 so that every
// date exists, times in UTC).
const std::map<std::string, std::string, std::less<>> kFormats = {
    {"date", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])$"},
    {"time", "^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,3})?Z$"},
    {"date-time", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,3})?Z$"},
    {"uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
};

bool is_type(const Json& v, std::string_view type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  // 2.0 is an integer to JSON Schema; std::trunc, not a cast, so 1e300 is one too and no cast overflows.
  if (type == "integer") return v.is_number_integer() || (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>());
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "array") return v.is_array();
  return v.is_object();
}

class SchemaCompiler {
 public:
  // Builds into `a`: its own automaton (compile_schema) or one another compiler is building
  // (schema_value). `root` is what "#" and "#/$defs/NAME" resolve against.
  // `no_close_tags`: strings never hold a raw "</" (tool_calls.h: the output parser ends a call's
  // block, or an XML parameter, at the first closing tag, even inside a JSON string).
  SchemaCompiler(const Json& root, Automaton& a, bool no_close_tags = false)
      : root_(root), a_(a), f_(a_), no_close_tags_(no_close_tags) {}

  std::shared_ptr<const Automaton> compile_root() {
    const int32_t rule = a_.add_rule("$");
    a_.set_root(rule);
    f_.define(rule, f_.seq(f_.whitespace(), value(root_, "$")));
    return finish();
  }

  std::shared_ptr<const Automaton> compile_object_root() {
    const int32_t rule = a_.add_rule("$");
    a_.set_root(rule);
    f_.define(rule, f_.seq(f_.whitespace(), f_.call(any_object())));
    return finish();
  }

  // The fragment for one value of schema `s` at `path` (a part of root_), in an automaton of another
  // compiler's making.
  Fragment fragment(const Json& s, const std::string& path) { return value(s, path); }
  Fragment any_object_fragment() { return f_.call(any_object()); }

 private:
  std::shared_ptr<const Automaton> finish() {
    // value() checks the size before each part; a part's own nodes (an enum, a pattern) are checked as
    // they are built, and the whole here.
    if (a_.node_count() > kMaxNodes) refuse("$", "the schema is too large to compile");
    a_.check();
    return std::make_shared<const Automaton>(std::move(a_));
  }

  [[noreturn]] static void refuse(const std::string& path, const std::string& message) { throw SchemaError(path, message); }

  static int64_t count(const Json& s, const char* key, const std::string& path, int64_t fallback) {
    const auto it = s.find(key);
    if (it == s.end()) return fallback;
    const std::string p = path + "." + key;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) refuse(p, fmt::format("'{}' must be a non-negative integer", key));
    if (it->get<int64_t>() > kMaxCount) refuse(p, fmt::format("'{}' above {} is not supported", key, kMaxCount));
    return it->get<int64_t>();
  }

  // The fragment for one value of schema `s` at `path`.
  Fragment value(const Json& s, const std::string& path) {
    if (a_.node_count() > kMaxNodes) refuse(path, "the schema is too large to compile");
    if (s.is_boolean()) {
      if (!s.get<bool>()) refuse(path, "the schema false matches nothing");
      return f_.call(any_value());
    }
    if (!s.is_object()) refuse(path, "a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items()) {
      if (!kKeywords.contains(key) && !kAnnotations.contains(key))
        refuse(path + "." + key, fmt::format("keyword '{}' is not supported", key));
    }
    // Value keywords beside the one that decides the value (annotations and $defs aside).
    auto siblings_except = [&](std::initializer_list<std::string_view> allowed, std::string_view what) {
      for (const auto& [key, v] : s.items()) {
        if (kAnnotations.contains(key) || key == "$defs" || key == "definitions" || key == what) continue;
        if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
        refuse(path + "." + key, fmt::format("keyword '{}' beside '{}' is not supported", key, what));
      }
    };
    if (s.contains("$ref")) {
      siblings_except({}, "$ref");
      return f_.call(ref_rule(s["$ref"], path + ".$ref"));
    }
    std::vector<std::string> types = type_list(s, path);
    if (s.contains("const") || s.contains("enum")) {
      const bool is_const = s.contains("const");
      const char* key = is_const ? "const" : "enum";
      siblings_except({"type"}, key);
      std::vector<Json> values;
      if (is_const) values.push_back(s["const"]);
      else {
        if (!s["enum"].is_array() || s["enum"].empty()) refuse(path + ".enum", "'enum' must be a non-empty array");
        for (const Json& v : s["enum"]) values.push_back(v);
      }
      std::vector<Fragment> alts;
      for (const Json& v : values) {
        const bool typed = types.empty() || std::any_of(types.begin(), types.end(), [&](const std::string& t) { return is_type(v, t); });
        if (typed) alts.push_back(f_.literal(v.dump()));
        if (a_.node_count() > kMaxNodes) refuse(path + "." + key, "the schema is too large to compile");
      }
      if (alts.empty()) refuse(path + "." + key, "no value here has the schema's type");
      return f_.choice(alts);
    }
    if (s.contains("anyOf")) {
      siblings_except({}, "anyOf");
      const Json& list = s["anyOf"];
      if (!list.is_array() || list.empty()) refuse(path + ".anyOf", "'anyOf' must be a non-empty array");
      std::vector<Fragment> alts;
      for (size_t i = 0; i < list.size(); ++i) alts.push_back(value(list[i], fmt::format("{}.anyOf[{}]", path, i)));
      return f_.choice(alts);
    }
    if (types.empty()) {
      // No type: the keywords say which, or any value.
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) types = {"object"};
      else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) types = {"array"};
      else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format"))
        types = {"string"};
      else return f_.call(any_value());
    }
    std::vector<Fragment> alts;
    for (const std::string& t : types) alts.push_back(typed(s, t, path));
    return alts.size() == 1 ? alts[0] : f_.choice(alts);
  }

  static std::vector<std::string> type_list(const Json& s, const std::string& path) {
    static const std::set<std::string, std::less<>> kTypes = {"object", "array", "string", "number", "integer", "boolean", "null"};
    std::vector<std::string> out;
    const auto it = s.find("type");
    if (it == s.end()) return out;
    auto add = [&](const Json& t, const std::string& p) {
      if (!t.is_string() || !kTypes.contains(t.get<std::string>())) refuse(p, "'type' must name a JSON Schema type");
      if (std::find(out.begin(), out.end(), t.get<std::string>()) == out.end()) out.push_back(t.get<std::string>());
    };
    if (it->is_array()) {
      if (it->empty()) refuse(path + ".type", "'type' must not be an empty list");
      for (size_t i = 0; i < it->size(); ++i) add((*it)[i], fmt::format("{}.type[{}]", path, i));
    } else {
      add(*it, path + ".type");
    }
    // "integer" is a "number": writing both would only repeat the integers.
    if (std::find(out.begin(), out.end(), "number") != out.end())
      out.erase(std::remove(out.begin(), out.end(), "integer"), out.end());
    return out;
  }

  Fragment typed(const Json& s, const std::string& type, const std::string& path) {
    if (type == "null") return f_.literal("null");
    if (type == "boolean") return f_.choice({f_.literal("true"), f_.literal("false")});
    if (type == "integer") return integer();
    if (type == "number") return number();
    if (type == "string") return string(s, path);
    if (type == "array") return array(s, path);
    return object(s, path);
  }

  // One to `n` digits, as nested optionals so that each prefix has one parse (a flat run of
  // optionals would leave a digit n ways to be read).
  Fragment digits(uint8_t first_lo, int n) {
    Fragment rest = f_.empty();
    for (int i = 1; i < n; ++i) rest = f_.optional(f_.seq(f_.bytes('0', '9'), rest));
    return f_.seq(f_.bytes(first_lo, '9'), rest);
  }

  // -?(0|[1-9][0-9]{0,14})
  Fragment integer() {
    return f_.seq(f_.optional(f_.literal("-")), f_.choice({f_.literal("0"), digits('1', 15)}));
  }

  // integer(\.[0-9]{1,16})?([eE][+-]?[0-9]{1,2})?
  Fragment number() {
    const Fragment exp = f_.seq(f_.seq(f_.choice({f_.literal("e"), f_.literal("E")}),
                                       f_.optional(f_.choice({f_.literal("+"), f_.literal("-")}))),
                                digits('0', 2));
    return f_.seq(f_.seq(integer(), f_.optional(f_.seq(f_.literal("."), digits('0', 16)))), f_.optional(exp));
  }

  Fragment string(const Json& s, const std::string& path) {
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    const bool pattern = s.contains("pattern"), format = s.contains("format");
    if (pattern && format) refuse(path + ".format", "'format' beside 'pattern' is not supported");
    if ((pattern || format) && lengths)
      refuse(path + (s.contains("minLength") ? ".minLength" : ".maxLength"), "string lengths beside a pattern or format are not supported");
    if (pattern || format) {
      std::string regex;
      std::string where = path + (pattern ? ".pattern" : ".format");
      const Json& v = s[pattern ? "pattern" : "format"];
      if (!v.is_string()) refuse(where, "must be a string");
      if (pattern) regex = v.get<std::string>();
      else {
        const auto it = kFormats.find(v.get<std::string>());
        if (it == kFormats.end()) refuse(where, fmt::format("format '{}' is not supported (date, time, date-time, uuid)", v.get<std::string>()));
        regex = it->second;
      }
      const Fragment body = compile_pattern(f_, regex, where);
      return f_.seq(f_.seq(f_.literal("\""), body), f_.literal("\""));
    }
    const int64_t lo = count(s, "minLength", path, 0), hi = count(s, "maxLength", path, -1);
    if (hi >= 0 && lo > hi) refuse(path + ".minLength", "'minLength' is above 'maxLength'");
    return f_.call(string_rule(lo, hi));
  }

  // Strings are rules of their own, one per length bound: the closing quote ends them, so the mask
  // cache knows most tokens inside one without looking at the stack.
  int32_t string_rule(int64_t lo, int64_t hi) {
    const auto key = std::make_pair(lo, hi);
    if (const auto it = strings_.find(key); it != strings_.end()) return it->second;
    const int32_t rule = a_.add_rule(hi < 0 && lo == 0 ? "string" : fmt::format("string{{{},{}}}", lo, hi));
    strings_.emplace(key, rule);
    if (no_close_tags_) {
      f_.define(rule, f_.seq(f_.seq(f_.literal("\""), body_without_close_tags(lo, hi)), f_.literal("\"")));
      return rule;
    }
    Fragment body = f_.empty();
    for (int64_t i = 0; i < lo; ++i) body = f_.seq(body, f_.json_char());
    if (hi < 0) body = f_.seq(body, f_.star(f_.json_char()));
    else {
      Fragment rest = f_.empty();
      for (int64_t i = lo; i < hi; ++i) rest = f_.optional(f_.seq(f_.json_char(), rest));
      body = f_.seq(body, rest);
    }
    f_.define(rule, f_.seq(f_.seq(f_.literal("\""), body), f_.literal("\"")));
    return rule;
  }

  // lo..hi (hi < 0: unbounded) characters with no raw '/' right after a raw '<': two nodes per
  // position, for "after a raw '<'" or not.
  Fragment body_without_close_tags(int64_t lo, int64_t hi) {
    const int64_t positions = hi < 0 ? lo : hi;
    std::vector<int32_t> plain, after_lt;
    for (int64_t i = 0; i <= positions; ++i) plain.push_back(a_.add_node()), after_lt.push_back(a_.add_node());
    const int32_t out = a_.add_node();
    auto link = [&](int32_t from, Fragment g, int32_t to) {
      a_.add_eps(from, g.in);
      a_.add_eps(g.out, to);
    };
    auto step = [&](size_t i, size_t j) {
      link(plain[i], f_.json_char("<"), plain[j]);
      link(plain[i], f_.literal("<"), after_lt[j]);
      link(after_lt[i], f_.json_char("</"), plain[j]);
      link(after_lt[i], f_.literal("<"), after_lt[j]);
    };
    for (int64_t i = 0; i < positions; ++i) step(size_t(i), size_t(i + 1));
    if (hi < 0) step(size_t(positions), size_t(positions));  // unbounded: loop at the last position
    for (int64_t i = lo; i <= positions; ++i) a_.add_eps(plain[size_t(i)], out), a_.add_eps(after_lt[size_t(i)], out);
    return {plain[0], out};
  }

  Fragment array(const Json& s, const std::string& path) {
    const int64_t lo = count(s, "minItems", path, 0), hi = count(s, "maxItems", path, -1);
    if (hi >= 0 && lo > hi) refuse(path + ".minItems", "'minItems' is above 'maxItems'");
    const auto items = s.find("items");
    if (items != s.end() && !items->is_object() && !items->is_boolean())
      refuse(path + ".items", "'items' must be one schema (tuples are not supported)");
    if (items != s.end() && items->is_boolean() && !items->get<bool>() && lo > 0)
      refuse(path + ".items", "'items' false leaves no element for 'minItems'");
    const bool none = items != s.end() && items->is_boolean() && !items->get<bool>();
    const int64_t max = none ? 0 : hi;
    // One rule for the element, called at every position.
    int32_t element = -1;
    if (max != 0) {
      element = a_.add_rule(path + ".items");
      f_.define(element, items == s.end() ? f_.call(any_value()) : value(*items, path + ".items"));
    }
    Fragment open = f_.seq(f_.literal("["), f_.whitespace());
    const int32_t out = a_.add_node();
    auto close_from = [&](int32_t at) {
      const Fragment c = f_.seq(f_.whitespace(), f_.literal("]"));
      a_.add_eps(at, c.in);
      a_.add_eps(c.out, out);
    };
    if (lo == 0) {
      const Fragment c = f_.literal("]");
      a_.add_eps(open.out, c.in);
      a_.add_eps(c.out, out);
    }
    if (max != 0) {
      Fragment first = f_.call(element);
      a_.add_eps(open.out, first.in);
      int32_t at = first.out;
      for (int64_t k = 1;; ++k) {  // `at`: after k elements
        if (k >= lo) close_from(at);
        if (max >= 0 && k == max) break;
        const Fragment next = f_.seq(f_.seq(f_.whitespace(), f_.literal(",")), f_.seq(f_.whitespace(), f_.call(element)));
        a_.add_eps(at, next.in);
        if (max < 0 && k >= std::max<int64_t>(lo, 1)) {
          a_.add_eps(next.out, at);  // unbounded: loop
          break;
        }
        at = next.out;
      }
    }
    return {open.in, out};
  }

  Fragment object(const Json& s, const std::string& path) {
    const auto props = s.find("properties");
    if (props != s.end() && !props->is_object()) refuse(path + ".properties", "'properties' must be an object");
    const auto extra = s.find("additionalProperties");
    if (extra != s.end() && !extra->is_boolean())
      refuse(path + ".additionalProperties", "'additionalProperties' other than true or false is not supported");
    std::set<std::string, std::less<>> required;
    if (const auto req = s.find("required"); req != s.end()) {
      if (!req->is_array()) refuse(path + ".required", "'required' must be an array of names");
      for (size_t i = 0; i < req->size(); ++i) {
        const std::string p = fmt::format("{}.required[{}]", path, i);
        if (!(*req)[i].is_string()) refuse(p, "'required' must be an array of names");
        const std::string name = (*req)[i].get<std::string>();
        if (props == s.end() || !props->contains(name))
          refuse(p, fmt::format("required property '{}' is not in 'properties'", name));
        required.insert(name);
      }
    }
    if ((props == s.end() || props->empty()) && !(extra != s.end() && !extra->get<bool>())) return f_.call(any_object());
    // Rules per object: its closing brace ends it (see string_rule).
    const int32_t rule = a_.add_rule(path);
    Fragment open = f_.seq(f_.literal("{"), f_.whitespace());
    // Before property i: `bare` nothing written yet, `after` something written (a comma comes first).
    int32_t bare = open.out, after = a_.add_node();
    if (props != s.end()) {
      for (const auto& [name, sub] : props->items()) {
        const Fragment member = f_.seq(f_.seq(f_.literal(Json(name).dump()), f_.whitespace()),
                                       f_.seq(f_.seq(f_.literal(":"), f_.whitespace()), value(sub, path + ".properties." + name)));
        const Fragment comma = f_.seq(f_.seq(f_.whitespace(), f_.literal(",")), f_.whitespace());
        a_.add_eps(bare, member.in);
        a_.add_eps(after, comma.in);
        a_.add_eps(comma.out, member.in);
        const int32_t next_after = member.out;
        if (required.contains(name)) {
          bare = a_.add_node();  // unreachable: nothing-written cannot pass a required property
          after = next_after;
        } else {
          a_.add_eps(after, next_after);
          after = next_after;
          // bare stays: the property may be left out
        }
      }
    }
    const int32_t out = a_.add_node();
    const Fragment close_bare = f_.literal("}");
    a_.add_eps(bare, close_bare.in);
    a_.add_eps(close_bare.out, out);
    const Fragment close_after = f_.seq(f_.whitespace(), f_.literal("}"));
    a_.add_eps(after, close_after.in);
    a_.add_eps(close_after.out, out);
    f_.define(rule, {open.in, out});
    return f_.call(rule);
  }

  int32_t ref_rule(const Json& ref, const std::string& path) {
    if (!ref.is_string()) refuse(path, "'$ref' must be a string");
    const std::string r = ref.get<std::string>();
    if (const auto it = refs_.find(r); it != refs_.end()) return it->second;
    const Json* target = nullptr;
    std::string target_path;
    if (r == "#") target = &root_, target_path = "$";
    for (const char* defs : {"$defs", "definitions"}) {
      const std::string prefix = fmt::format("#/{}/", defs);
      if (r.rfind(prefix, 0) != 0) continue;
      const std::string name = r.substr(prefix.size());
      if (name.find('/') != std::string::npos || name.find('~') != std::string::npos) break;
      const auto d = root_.find(defs);
      if (d != root_.end() && d->is_object() && d->contains(name)) target = &(*d)[name], target_path = fmt::format("$.{}.{}", defs, name);
    }
    if (!target) refuse(path, fmt::format("'$ref' '{}' names no schema here (only #, #/$defs/NAME, #/definitions/NAME)", r));
    // The rule exists before its body, so a body that refers back to it calls it.
    const int32_t rule = a_.add_rule(target_path);
    refs_.emplace(r, rule);
    f_.define(rule, value(*target, target_path));
    return rule;
  }

  // Generic JSON, for schemas that leave a value open and for json_object.
  int32_t any_value() {
    if (any_value_ >= 0) return any_value_;
    any_value_ = a_.add_rule("value");
    const Fragment v = f_.choice({f_.call(any_object()), f_.call(any_array()), f_.call(string_rule(0, -1)), number(),
                                  f_.literal("true"), f_.literal("false"), f_.literal("null")});
    f_.define(any_value_, v);
    return any_value_;
  }

  int32_t any_object() {
    if (any_object_ >= 0) return any_object_;
    any_object_ = a_.add_rule("object");
    const Fragment member = f_.seq(f_.seq(f_.call(string_rule(0, -1)), f_.whitespace()),
                                   f_.seq(f_.seq(f_.literal(":"), f_.whitespace()), f_.call(any_value())));
    const Fragment more = f_.star(f_.seq(f_.seq(f_.seq(f_.whitespace(), f_.literal(",")), f_.whitespace()), member));
    const Fragment body = f_.choice({f_.literal("}"), f_.seq(f_.seq(member, more), f_.seq(f_.whitespace(), f_.literal("}"))) });
    f_.define(any_object_, f_.seq(f_.seq(f_.literal("{"), f_.whitespace()), body));
    return any_object_;
  }

  int32_t any_array() {
    if (any_array_ >= 0) return any_array_;
    any_array_ = a_.add_rule("array");
    const Fragment more = f_.star(f_.seq(f_.seq(f_.seq(f_.whitespace(), f_.literal(",")), f_.whitespace()), f_.call(any_value())));
    const Fragment body = f_.choice({f_.literal("]"), f_.seq(f_.seq(f_.call(any_value()), more), f_.seq(f_.whitespace(), f_.literal("]")))});
    f_.define(any_array_, f_.seq(f_.seq(f_.literal("["), f_.whitespace()), body));
    return any_array_;
  }

  const Json& root_;
  Automaton& a_;
  Fragments f_;
  std::map<std::string, int32_t> refs_;
  std::map<std::pair<int64_t, int64_t>, int32_t> strings_;
  int32_t any_value_ = -1, any_object_ = -1, any_array_ = -1;
  bool no_close_tags_ = false;
};

}  // namespace

std::shared_ptr<const Automaton> compile_schema(const nlohmann::ordered_json& schema) {
  Automaton a;
  return SchemaCompiler(schema, a).compile_root();
}

std::shared_ptr<const Automaton> compile_any_object() {
  static const Json kNone;
  Automaton a;
  return SchemaCompiler(kNone, a).compile_object_root();
}

Fragment schema_value(Automaton& a, const nlohmann::ordered_json& root, const nlohmann::ordered_json& schema,
                      const std::string& path, bool no_close_tags) {
  return SchemaCompiler(root, a, no_close_tags).fragment(schema, path);
}

Fragment any_object_value(Automaton& a, bool no_close_tags) {
  static const Json kNone;
  return SchemaCompiler(kNone, a, no_close_tags).any_object_fragment();
}

}  // namespace rocket::grammar
