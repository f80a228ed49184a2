// Tool calls under a grammar (src/grammar/tool_calls.h): both tool-call formats, tool_choice required,
// named and auto with strict tools, enums and nested objects in parameters, raw XML strings with '<',
// refusals naming the tool and path, and random walks whose every accepted text the real output
// parser reads back into calls whose arguments validate.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "grammar/grammar_cache.h"
#include "grammar/matcher.h"
#include "grammar/schema_error.h"
#include "grammar/tool_calls.h"
#include "openai/output_parser.h"
#include "openai/prompt_builder.h"
#include "qwen_fixtures.h"

namespace rocket::grammar {
namespace {

using Json = nlohmann::ordered_json;

const Json kWeather = Json::parse(R"({"type":"object","properties":{
  "city":{"type":"string","description":"where"},
  "unit":{"type":"string","enum":["celsius","fahrenheit"]},
  "days":{"type":"integer"}},
  "required":["city","unit"],"additionalProperties":false})");
const Json kSearch = Json::parse(R"({"type":"object","properties":{
  "query":{"type":"string"},
  "filters":{"type":"object","properties":{
     "tags":{"type":"array","items":{"enum":["news","blog","paper"]},"maxItems":3},
     "limit":{"type":"integer"},
     "exact":{"type":["boolean","null"]},
     "label":{"type":"string","maxLength":8}},
   "required":["limit"],"additionalProperties":false},
  "mode":{"enum":["fast","deep"]}},
  "required":["query","filters"],"additionalProperties":false})");

std::vector<Tool> tools_of(bool strict_search = true) {
  return {Tool{"get_weather", "", kWeather, true}, Tool{"search", "", kSearch, strict_search},
          Tool{"note", "", Json(nullptr), false}};
}

ToolCallsSpec spec_of(ToolSyntax syntax, ToolCallsSpec::Answer answer, const std::vector<Tool>& tools, bool parallel = true,
                      bool all_validated = true) {
  ToolCallsSpec s;
  s.syntax = syntax;
  s.answer = answer;
  s.parallel = parallel;
  for (const Tool& t : tools) s.tools.push_back({t.name, t.parameters, all_validated || t.strict});
  return s;
}

// The 256 single bytes, the tags and JSON pieces a random walk needs to finish (so that walks close
// values instead of wandering in raw text), and an eos.
Vocabulary walk_vocabulary() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, char(b)));
  for (const char* t : {"<tool_call>\n", "\n</tool_call>", "</function>", "\n</parameter>\n", "<parameter=", ">\n",
                        "\"", "}", "]", "\", ", ": ", "<function=", "get_weather", "search", "note", "celsius", "true",
                        "null", "12", "news", "\"paper\"", "<", "</", "</param", "fast", "deep"})
    tokens.push_back(t);
  tokens.push_back("");
  const int eos = int(tokens.size()) - 1;
  return Vocabulary{TokenTrie::from_tokens(tokens, int(tokens.size())), {eos}};
}

const Vocabulary& vocabulary() {
  static const Vocabulary v = walk_vocabulary();
  return v;
}

std::shared_ptr<const CompiledGrammar> grammar(const ToolCallsSpec& s) {
  return std::make_shared<const CompiledGrammar>(compile_tool_calls(s), vocabulary());
}

bool accepts(const ToolCallsSpec& s, std::string_view text) {
  Matcher m(grammar(s));
  return m.advance_bytes(text) && m.accepting();
}

// Whether `text` is a prefix of some text of the grammar (a refused one fails at the byte at fault).
bool takes(const ToolCallsSpec& s, std::string_view text) {
  Matcher m(grammar(s));
  return m.advance_bytes(text);
}

std::string refusal(const ToolCallsSpec& s) {
  try {
    compile_tool_calls(s);
  } catch (const SchemaError& e) {
    return e.what();
  }
  return "";
}

// A validator of the subset the schemas here use (type, properties, required, additionalProperties,
// enum, items, maxItems): the ajv oracle (tests/e2e/structured_outputs.mjs) is the independent one.
bool valid(const Json& s, const Json& v) {
  if (s.is_null() || s.empty()) return true;
  if (const auto e = s.find("enum"); e != s.end())
    if (std::find(e->begin(), e->end(), v) == e->end()) return false;
  if (const auto t = s.find("type"); t != s.end()) {
    const auto is = [&](const std::string& type) {
      if (type == "object") return v.is_object();
      if (type == "array") return v.is_array();
      if (type == "string") return v.is_string();
      if (type == "integer") return v.is_number_integer();
      if (type == "number") return v.is_number();
      if (type == "boolean") return v.is_boolean();
      return v.is_null();
    };
    bool any = false;
    if (t->is_string()) any = is(t->get<std::string>());
    else
      for (const Json& x : *t) any = any || is(x.get<std::string>());
    if (!any) return false;
  }
  if (v.is_object()) {
    const Json props = s.value("properties", Json::object());
    for (const Json& r : s.value("required", Json::array()))
      if (!v.contains(r.get<std::string>())) return false;
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!valid(props[k], x)) return false;
      } else if (s.value("additionalProperties", Json(true)) == Json(false)) {
        return false;
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    if (s.contains("items"))
      for (const Json& x : v)
        if (!valid(s["items"], x)) return false;
  }
  return true;
}

struct ParsedTurn {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

ParsedTurn parse_back(ToolSyntax syntax, const std::vector<Tool>& tools, std::string_view text) {
  OutputParser::Options o;
  o.format = syntax == ToolSyntax::kXml ? ToolCallFormat::kXml : ToolCallFormat::kJson;
  o.parameters = std::make_shared<const ParameterTypes>(parameter_types(tools));
  OutputParser p(o, std::mt19937_64(1));
  ParsedTurn out;
  auto take = [&](std::vector<OutputEvent> events) {
    for (OutputEvent& e : events) {
      if (auto* c = std::get_if<ContentDelta>(&e)) out.content += c->text;
      if (auto* s = std::get_if<ToolCallStart>(&e)) out.calls.emplace_back(s->name, "");
      if (auto* a = std::get_if<ToolCallArgumentsDelta>(&e)) out.calls.back().second += a->fragment;
    }
  };
  take(p.push(text));
  take(p.finish());
  return out;
}

// Random walks under `s`; each finished text must parse back into calls (kCalls: nothing else) whose
// arguments validate under the tool's schema when the tool is validated. Returns the walks finished.
int walk_and_check(const ToolCallsSpec& s, const std::vector<Tool>& tools, int runs, uint32_t seed) {
  const auto g = grammar(s);
  const Vocabulary& v = vocabulary();
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(size_t(v.trie.mask_words()));
  int finished = 0;
  for (int run = 0; run < runs; ++run) {
    Matcher m(g);
    std::string text;
    for (int step = 0; step < 1500 && !m.done(); ++step) {
      const int n = m.fill_mask(mask);
      EXPECT_GT(n, 0) << "empty mask after " << text;
      if (n == 0) return finished;
      std::vector<int32_t> ok, structural;
      for (int32_t id = 0; id < v.trie.vocab(); ++id)
        if (mask[size_t(id) / 32] >> (id % 32) & 1u) (id >= 256 ? structural : ok).push_back(id);
      // Mostly the tags and JSON pieces (eos included), so that walks finish; now and then any byte.
      const bool pick_structural = !structural.empty() && (ok.empty() || std::uniform_int_distribution<int>(0, 9)(rng) < 6);
      const auto& from = pick_structural ? structural : ok;
      const int32_t pick = from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
      EXPECT_TRUE(m.advance(pick));
      if (!m.done()) text += v.trie.token_bytes(pick);
    }
    if (!m.done()) continue;
    ++finished;
    const ParsedTurn turn = parse_back(s.syntax, tools, text);
    if (s.answer == ToolCallsSpec::Answer::kCalls) {
      EXPECT_GE(turn.calls.size(), 1u) << text;
      EXPECT_EQ(turn.content, "") << text;
    }
    if (!s.parallel) EXPECT_LE(turn.calls.size(), 1u) << text;
    // A finished walk that wrote "<tool_call>" wrote a call the parser reads: none falls back to content.
    if (text.find("<tool_call>") != std::string::npos) EXPECT_GE(turn.calls.size(), 1u) << text;
    EXPECT_EQ(turn.content.find("<tool_call>"), std::string::npos) << text;
    for (const auto& [name, arguments] : turn.calls) {
      const auto tool = std::find_if(s.tools.begin(), s.tools.end(), [&](const ToolSignature& t) { return t.name == name; });
      EXPECT_NE(tool, s.tools.end()) << name << " in " << text;
      if (tool == s.tools.end()) continue;
      const Json args = Json::parse(arguments, nullptr, /*allow_exceptions=*/false);
      EXPECT_TRUE(args.is_object()) << arguments << " from " << text;
      if (tool->validate) EXPECT_TRUE(valid(tool->parameters, args)) << name << " " << arguments << " from " << text;
    }
  }
  return finished;
}

constexpr auto kCalls = ToolCallsSpec::Answer::kCalls;
constexpr auto kTextOrCalls = ToolCallsSpec::Answer::kTextOrCalls;

TEST(ToolGrammar, JsonRequired) {
  const ToolCallsSpec s = spec_of(ToolSyntax::kJson, kCalls, tools_of());
  const std::string weather = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa<ris\", \"unit\": \"celsius\"}}\n</tool_call>";
  EXPECT_TRUE(accepts(s, weather));
  EXPECT_TRUE(accepts(s, weather + "\n" + weather));  // parallel calls
  EXPECT_FALSE(takes(spec_of(ToolSyntax::kJson, kCalls, tools_of(), /*parallel=*/false), weather + "\n" + weather));
  EXPECT_TRUE(accepts(s, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"q\", \"filters\": {\"tags\": "
                         "[\"news\", \"paper\"], \"limit\": 3}, \"mode\": \"deep\"}}\n</tool_call>"));
  EXPECT_TRUE(accepts(s, "<tool_call>\n{\"name\": \"note\", \"arguments\": {\"anything\": [1, {\"x\": null}]}}\n</tool_call>"));
  // A name outside the tools, a missing required property, an undeclared one, a value off its enum, a
  // nested object missing its required limit, text around the call: none is a prefix of the grammar.
  EXPECT_FALSE(takes(s, "<tool_call>\n{\"name\": \"get_time\""));
  EXPECT_FALSE(takes(s, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}"));
  EXPECT_FALSE(takes(s, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"unit\": \"celsius\", \"x\""));
  EXPECT_FALSE(takes(s, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"unit\": \"kelvin\""));
  EXPECT_FALSE(takes(s, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"q\", \"filters\": {}"));
  // A raw "</" inside a JSON string would let "</tool_call>" end the block there; "<\/" is the same string.
  EXPECT_FALSE(takes(s, "<tool_call>\n{\"name\": \"note\", \"arguments\": {\"x\": \"a</tool_call>"));
  EXPECT_FALSE(takes(s, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"<</"));
  EXPECT_TRUE(accepts(s, "<tool_call>\n{\"name\": \"note\", \"arguments\": {\"x\": \"a<\\/tool_call> <<b\"}}\n</tool_call>"));
  EXPECT_FALSE(takes(s, "Sure! " + weather));
  EXPECT_FALSE(takes(s, weather + " done"));
  EXPECT_FALSE(accepts(s, ""));
}

TEST(ToolGrammar, XmlRequired) {
  const ToolCallsSpec s = spec_of(ToolSyntax::kXml, kCalls, tools_of());
  const std::string weather =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\na <b> & </param\n</parameter>\n"
      "<parameter=unit>\nfahrenheit\n</parameter>\n<parameter=days>\n-3\n</parameter>\n</function>\n</tool_call>";
  EXPECT_TRUE(accepts(s, weather));
  EXPECT_TRUE(accepts(s, weather + weather));
  EXPECT_TRUE(accepts(s, "<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n<parameter=filters>\n"
                         "{\"tags\": [\"blog\"], \"limit\": 0, \"exact\": null}\n</parameter>\n<parameter=mode>\nfast\n"
                         "</parameter>\n</function>\n</tool_call>"));
  EXPECT_TRUE(accepts(s, "<tool_call>\n<function=note>\n<parameter=any name>\nany <text>\n</parameter>\n</function>\n</tool_call>"));
  // The raw string cannot hold the tags the parser stops at; an integer is JSON; enums are literal.
  EXPECT_FALSE(takes(s, "<tool_call>\n<function=get_weather>\n<parameter=city>\na</parameter>"));
  EXPECT_FALSE(takes(s, "<tool_call>\n<function=get_weather>\n<parameter=city>\na</tool_call>"));
  EXPECT_FALSE(takes(s, "<tool_call>\n<function=get_weather>\n<parameter=city>\nP\n</parameter>\n<parameter=unit>\nkelvin"));
  EXPECT_FALSE(takes(s, "<tool_call>\n<function=get_weather>\n<parameter=city>\nP\n</parameter>\n<parameter=unit>\n"
                          "celsius\n</parameter>\n<parameter=days>\nthree"));
  EXPECT_FALSE(takes(s, "<tool_call>\n<function=get_weather>\n<parameter=city>\nP\n</parameter>\n</function>"));  // unit
  EXPECT_FALSE(takes(s, "<tool_call>\n<function=get_weather>\n<parameter=town>"));
  // Nor can a JSON-valued parameter's strings.
  EXPECT_FALSE(takes(s, "<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n<parameter=filters>\n"
                          "{\"tags\": [], \"limit\": 1, \"label\": \"a<</"));
  EXPECT_TRUE(takes(s, "<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n<parameter=filters>\n"
                       "{\"tags\": [], \"limit\": 1, \"label\": \"a<<\\/\"}"));
  EXPECT_FALSE(takes(s, "<tool_call>\n<function=note>\n<parameter=a>\n{\"k\": \"</parameter>"));
  // What the grammar accepts, the parser reads back with '<' kept and the integer as a number.
  const ParsedTurn t = parse_back(ToolSyntax::kXml, tools_of(), weather);
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].second, R"({"city":"a <b> & </param","unit":"fahrenheit","days":-3})");
}

TEST(ToolGrammar, NamedFunctionTakesTheForcedOpening) {
  for (ToolSyntax syntax : {ToolSyntax::kJson, ToolSyntax::kXml}) {
    const std::vector<Tool> tools = tools_of();
    const ToolCallsSpec s = spec_of(syntax, kCalls, {tools[1]}, /*parallel=*/false);
    CompletionRequest r;
    r.tool_choice = {ToolChoice::Mode::kFunction, "search"};
    const std::string opening = forced_opening(r, false, syntax == ToolSyntax::kXml ? ToolCallFormat::kXml : ToolCallFormat::kJson);
    Matcher m(grammar(s));
    EXPECT_TRUE(m.advance_bytes(opening)) << opening;
    Matcher other(grammar(spec_of(syntax, kCalls, {tools[0]}, false)));
    EXPECT_FALSE(other.advance_bytes(opening));  // a call of get_weather only
    EXPECT_GE(walk_and_check(s, tools, 20, 3), 10);
  }
}

TEST(ToolGrammar, StrictToolsUnderAuto) {
  const std::vector<Tool> tools = tools_of(/*strict_search=*/false);
  for (ToolSyntax syntax : {ToolSyntax::kJson, ToolSyntax::kXml}) {
    const ToolCallsSpec s = spec_of(syntax, kTextOrCalls, tools, true, /*all_validated=*/false);
    EXPECT_TRUE(accepts(s, ""));
    EXPECT_TRUE(accepts(s, "Just text, with <tags> and <tool_call but no call."));
    EXPECT_FALSE(takes(s, "text <tool_call>\nnot a call"));
  }
  const ToolCallsSpec json = spec_of(ToolSyntax::kJson, kTextOrCalls, tools, true, false);
  EXPECT_TRUE(accepts(json, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"unit\": "
                            "\"celsius\"}}\n</tool_call>"));
  // get_weather is strict: its arguments validate; search is not: any object.
  EXPECT_FALSE(takes(json, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\""));
  EXPECT_TRUE(accepts(json, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"town\": 1}}\n</tool_call>"));
  EXPECT_FALSE(takes(json, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"town\": 1}}\n</tool_call> and more"));
  const ToolCallsSpec xml = spec_of(ToolSyntax::kXml, kTextOrCalls, tools, true, false);
  EXPECT_FALSE(takes(xml, "<tool_call>\n<function=get_weather>\n<parameter=town>"));
  EXPECT_TRUE(accepts(xml, "<tool_call>\n<function=search>\n<parameter=town>\nx\n</parameter>\n</function>\n</tool_call>"));
  // With a response_format, the answer is its JSON or the calls.
  ToolCallsSpec with_format = json;
  with_format.content_json = true;
  with_format.content_schema = Json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})");
  EXPECT_TRUE(accepts(with_format, "{\"a\": 1}"));
  EXPECT_FALSE(takes(with_format, "free text"));
  EXPECT_TRUE(accepts(with_format, "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>"));
}

TEST(ToolGrammar, RandomWalksParseBackAndValidate) {
  const std::vector<Tool> tools = tools_of(false);
  for (ToolSyntax syntax : {ToolSyntax::kJson, ToolSyntax::kXml}) {
    SCOPED_TRACE(syntax == ToolSyntax::kXml ? "xml" : "json");
    EXPECT_GE(walk_and_check(spec_of(syntax, kCalls, tools), tools, 40, 17), 20);
    EXPECT_GE(walk_and_check(spec_of(syntax, kCalls, tools, /*parallel=*/false), tools, 20, 5), 10);
    EXPECT_GE(walk_and_check(spec_of(syntax, kTextOrCalls, tools, true, false), tools, 40, 29), 20);
  }
}

TEST(ToolGrammar, RefusalsNameTheToolAndPath) {
  auto with = [](const char* schema, ToolSyntax syntax) {
    return refusal(spec_of(syntax, kCalls, {Tool{"f", "", Json::parse(schema), true}}));
  };
  EXPECT_EQ(with(R"({"type":"array"})", ToolSyntax::kJson), "$.type: function 'f': a function's parameters must be an object schema (type 'object')");
  EXPECT_EQ(with(R"({"type":"object","properties":{"n":{"type":"integer","minimum":1}}})", ToolSyntax::kJson),
            "$.properties.n.minimum: function 'f': keyword 'minimum' is not supported");
  EXPECT_EQ(with(R"({"type":"object","properties":{"s":{"type":"string","pattern":"^a$"}}})", ToolSyntax::kXml),
            "$.properties.s.pattern: function 'f': 'pattern' on a parameter the XML tool-call format reads as text is not "
            "supported; give it a 'type' other than string, or drop 'pattern'");
  EXPECT_EQ(with(R"({"type":"object","properties":{"s":{"type":"string","pattern":"^a$"}}})", ToolSyntax::kJson), "");
  EXPECT_EQ(with(R"({"type":"object","properties":{"e":{"enum":[1,2]}}})", ToolSyntax::kXml).rfind("$.properties.e: function 'f': the XML", 0), 0u);
  EXPECT_EQ(with(R"({"type":"object","properties":{"e":{"type":"integer","enum":[1,2]}}})", ToolSyntax::kXml), "");
}

TEST(ToolGrammar, CachedBySpec) {
  Vocabulary v = walk_vocabulary();
  GrammarCache cache(std::move(v));
  const ToolCallsSpec a = spec_of(ToolSyntax::kJson, kCalls, tools_of());
  ToolCallsSpec b = a;
  b.syntax = ToolSyntax::kXml;
  EXPECT_EQ(cache.get(a), cache.get(a));
  EXPECT_NE(cache.get(a), cache.get(b));
  b = a;
  b.answer = kTextOrCalls;
  EXPECT_NE(cache.get(a), cache.get(b));
}

// On the real Qwen vocabulary the masks of both formats never go empty (random walks, finished or not).
TEST(ToolGrammar, NeverEmptyOnTheQwenVocabulary) {
  const Tokenizer& tok = test::qwen();
  GrammarCache cache(Vocabulary{TokenTrie::build(tok, 151936), {*tok.token_id("<|im_end|>")}});
  const std::vector<Tool> tools = tools_of();
  std::mt19937 rng(23);
  std::vector<uint32_t> mask(size_t(cache.vocabulary().trie.mask_words()));
  for (ToolSyntax syntax : {ToolSyntax::kJson, ToolSyntax::kXml}) {
    const auto g = cache.get(spec_of(syntax, kCalls, tools, /*parallel=*/false));
    for (int run = 0; run < 3; ++run) {
      Matcher m(g);
      std::string text;
      for (int step = 0; step < 200 && !m.done(); ++step) {
        ASSERT_GT(m.fill_mask(mask), 0) << "empty mask after " << text;
        std::vector<int32_t> ok;
        for (int32_t id = 0; id < 151936; ++id)
          if (mask[size_t(id) / 32] >> (id % 32) & 1u) ok.push_back(id);
        int32_t pick = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
        // The shortest tokens close values soonest; prefer them now and then.
        if (step > 20 && std::uniform_int_distribution<int>(0, 1)(rng) == 0)
          for (int32_t id : ok)
            if (tok.token_bytes(id).size() <= 2 || id == cache.vocabulary().eos[0]) pick = id;
        ASSERT_TRUE(m.advance(pick));
        if (!m.done()) text += tok.token_bytes(pick);
      }
    }
  }
}

}  // namespace
}  // namespace rocket::grammar
