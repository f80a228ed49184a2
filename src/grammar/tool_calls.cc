#include "grammar/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "grammar/fragments.h"
#include "grammar/json_schema.h"
#include "grammar/schema_error.h"

namespace rocket::grammar {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kToolOpen = "<tool_call>";
constexpr std::string_view kParameterClose = "</parameter>";
constexpr std::string_view kToolClose = "</tool_call>";

// The `type` names of a property as the output parser reads them (parameter_types in
// openai/output_parser.cc): only the keyword itself, a string or a list of strings.
std::vector<std::string> declared_types(const Json& s) {
  std::vector<std::string> out;
  if (!s.is_object()) return out;
  const auto t = s.find("type");
  if (t == s.end()) return out;
  if (t->is_string()) out.push_back(t->get<std::string>());
  if (t->is_array())
    for (const Json& x : *t)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

class ToolCallsCompiler {
 public:
  explicit ToolCallsCompiler(const ToolCallsSpec& spec) : spec_(spec), f_(a_) {}

  std::shared_ptr<const Automaton> compile() {
    if (spec_.tools.empty()) throw SchemaError("$", "no tool to call");
    const int32_t root = a_.add_rule("$tools");
    a_.set_root(root);
    std::vector<Fragment> alternatives;
    for (const ToolSignature& tool : spec_.tools) {
      try {
        alternatives.push_back(f_.call(tool_rule(tool)));
      } catch (const SchemaError& e) {
        throw SchemaError(e.path(), fmt::format("function '{}': {}", tool.name, e.message()));
      }
    }
    // One call, a rule of its own: the parallel calls after the first call it again.
    const int32_t call = a_.add_rule("$tools.call");
    f_.define(call, f_.seq(f_.seq(f_.literal(std::string(kToolOpen) + "\n"), f_.choice(alternatives)),
                           f_.literal("\n</tool_call>")));
    Fragment calls = f_.call(call);
    if (spec_.parallel) calls = f_.seq(calls, f_.star(f_.seq(f_.optional(f_.literal("\n")), f_.call(call))));
    if (spec_.answer == ToolCallsSpec::Answer::kTextOrCalls && spec_.content_json) {
      const Json& c = spec_.content_schema;
      const Fragment content = c.is_null() ? any_object_value(a_) : schema_value(a_, c, c, "$");
      calls = f_.choice({f_.seq(f_.whitespace(), content), calls});
    } else if (spec_.answer == ToolCallsSpec::Answer::kTextOrCalls) {
      calls = f_.seq(f_.without({kToolOpen}), f_.optional(calls));
    }
    f_.define(root, calls);
    a_.check();
    return std::make_shared<const Automaton>(std::move(a_));
  }

 private:
  // One call's body between "<tool_call>\n" and "\n</tool_call>", a rule per tool (the parallel
  // calls' alternatives call the same rules).
  int32_t tool_rule(const ToolSignature& tool) {
    const int32_t rule = a_.add_rule("$tools." + tool.name);
    const Json& p = tool.parameters;
    if (!p.is_null() && !p.is_object()) throw SchemaError("$", "'parameters' must be a JSON Schema object");
    const bool any = !tool.validate || p.is_null() || !(p.contains("type") || p.contains("properties") || p.contains("required") ||
                                                        p.contains("additionalProperties"));
    if (!any && p.contains("type") && p["type"] != "object")
      throw SchemaError("$.type", "a function's parameters must be an object schema (type 'object')");
    if (spec_.syntax == ToolSyntax::kJson) {
      const Fragment args = any ? any_object_value(a_, true) : schema_value(a_, p, p, "$", true);
      const std::string head = "{\"name\": " + Json(tool.name).dump() + ", \"arguments\": ";
      f_.define(rule, f_.seq(f_.seq(f_.literal(head), args), f_.literal("}")));
    } else {
      const Fragment params = any ? any_parameters(p, tool.validate) : declared_parameters(p);
      f_.define(rule, f_.seq(f_.seq(f_.literal("<function=" + tool.name + ">\n"), params), f_.literal("</function>")));
    }
    return rule;
  }

  // XML: one parameter's text, from "<parameter=" to the newline after its closing tag.
  Fragment parameter(Fragment name, Fragment value) {
    return f_.seq(f_.seq(f_.seq(f_.literal("<parameter="), name), f_.literal(">\n")),
                  f_.seq(value, f_.literal("\n</parameter>\n")));
  }

  // The parser ends the parameter at its first "</parameter>" and the call at its first "</tool_call>".
  Fragment raw_text() { return f_.without({kParameterClose, kToolClose}); }

  // XML, any parameters: names as the parser reads them (no '<', '>' or newline), raw values. A
  // validated schema with additionalProperties false and no properties takes none.
  Fragment any_parameters(const Json& p, bool validate) {
    if (validate && p.is_object() && p.value("additionalProperties", Json(true)) == Json(false)) return f_.empty();
    const Fragment name_char = f_.choice({f_.bytes(0x00, '\n' - 1), f_.bytes('\n' + 1, '<' - 1), f_.bytes('=', '='),
                                          f_.bytes('>' + 1, 0xFF)});
    const Fragment name = f_.seq(name_char, f_.star(f_.choice({f_.bytes(0x00, '\n' - 1), f_.bytes('\n' + 1, '<' - 1),
                                                               f_.bytes('=', '='), f_.bytes('>' + 1, 0xFF)})));
    return f_.star(parameter(name, raw_text()));
  }

  Fragment declared_parameters(const Json& p) {
    const auto props = p.find("properties");
    if (props != p.end() && !props->is_object()) throw SchemaError("$.properties", "'properties' must be an object");
    std::set<std::string, std::less<>> required;
    if (const auto req = p.find("required"); req != p.end()) {
      if (!req->is_array()) throw SchemaError("$.required", "'required' must be an array of names");
      for (size_t i = 0; i < req->size(); ++i) {
        const std::string path = fmt::format("$.required[{}]", i);
        if (!(*req)[i].is_string()) throw SchemaError(path, "'required' must be an array of names");
        if (props == p.end() || !props->contains((*req)[i].get<std::string>()))
          throw SchemaError(path, fmt::format("required property '{}' is not in 'properties'", (*req)[i].get<std::string>()));
        required.insert((*req)[i].get<std::string>());
      }
    }
    if (props == p.end() || props->empty()) return any_parameters(p, true);
    // The JSON compiler checks the rest of the object's keywords; here only its properties matter.
    Fragment out = f_.empty();
    for (const auto& [name, sub] : props->items()) {
      const std::string path = "$.properties." + name;
      if (name.empty() || name.find_first_of("<>\n") != std::string::npos)
        throw SchemaError(path, "a parameter name of the XML tool-call format has no '<', '>' or newline");
      const Fragment member = parameter(f_.literal(name), value(p, sub, path));
      out = f_.seq(out, required.contains(name) ? member : f_.optional(member));
    }
    return out;
  }

  // XML: one parameter's value, encoded as the parser decodes it.
  Fragment value(const Json& root, const Json& s, const std::string& path) {
    const std::vector<std::string> types = declared_types(s);
    const bool verbatim = types.empty() || std::find(types.begin(), types.end(), "string") != types.end();
    if (!verbatim) return schema_value(a_, root, s, path, true);
    // Read as raw text: the value is a string, which the schema must accept.
    if (s.is_boolean()) {
      if (!s.get<bool>()) throw SchemaError(path, "the schema false matches nothing");
      return raw_text();
    }
    if (!s.is_object()) throw SchemaError(path, "a schema must be an object or a boolean");
    // Checked by the JSON compiler for its subset (the raw form below writes a part of what it accepts).
    schema_value(a_, root, s, path);
    if (s.contains("const") || s.contains("enum")) {
      std::vector<Json> values;
      if (s.contains("const")) values.push_back(s["const"]);
      else
        for (const Json& v : s["enum"]) values.push_back(v);
      std::vector<Fragment> alts;
      for (const Json& v : values) {
        if (!v.is_string()) continue;
        const std::string& text = v.get_ref<const std::string&>();
        // The parser trims one newline each side and stops at the first closing tag.
        if (text.starts_with('\n') || text.ends_with('\n') || text.find(kParameterClose) != std::string::npos ||
            text.find(kToolClose) != std::string::npos)
          continue;
        alts.push_back(f_.literal(text));
      }
      if (alts.empty())
        throw SchemaError(path, "the XML tool-call format reads this parameter as text, and no value of its enum/const is "
                                "a string writable as text");
      return f_.choice(alts);
    }
    for (const char* key : {"minLength", "maxLength", "pattern", "format", "anyOf", "$ref", "properties", "items"}) {
      if (s.contains(key))
        throw SchemaError(path + "." + key, fmt::format("'{}' on a parameter the XML tool-call format reads as text is not "
                                                        "supported; give it a 'type' other than string, or drop '{}'",
                                                        key, key));
    }
    return raw_text();
  }

  const ToolCallsSpec& spec_;
  Automaton a_;
  Fragments f_;
};

}  // namespace

std::string ToolCallsSpec::key() const {
  Json k = Json::object();
  k["syntax"] = syntax == ToolSyntax::kXml ? "xml" : "json";
  k["answer"] = answer == Answer::kCalls ? "calls" : "text_or_calls";
  k["parallel"] = parallel;
  if (content_json) k["content"] = content_schema;
  Json list = Json::array();
  for (const ToolSignature& t : tools) list.push_back(Json{{"name", t.name}, {"parameters", t.parameters}, {"validate", t.validate}});
  k["tools"] = std::move(list);
  return k.dump();
}

std::shared_ptr<const Automaton> compile_tool_calls(const ToolCallsSpec& spec) { return ToolCallsCompiler(spec).compile(); }

}  // namespace rocket::grammar
