// Structured outputs (src/grammar): the schema subset feature by feature, refusals with their paths,
// masks checked token by token against the matcher itself, masks that never go empty on the real
// Qwen vocabulary, Unicode and escapes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "qwen_fixtures.h"

namespace rocket::grammar {
namespace {

using Json = nlohmann::ordered_json;

// A vocabulary of the 256 single bytes, plus `extra` tokens.
Vocabulary byte_vocabulary(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, char(b)));
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  tokens.push_back("");  // an id with no bytes: the eos below
  const int eos = int(tokens.size()) - 1;
  return Vocabulary{TokenTrie::from_tokens(tokens, int(tokens.size())), {eos}};
}

const Vocabulary& bytes_only() {
  static const Vocabulary v = byte_vocabulary();
  return v;
}

bool accepts(const Json& schema, std::string_view text) {
  auto g = std::make_shared<const CompiledGrammar>(compile_schema(schema), bytes_only());
  Matcher m(g);
  return m.advance_bytes(text) && m.accepting();
}

std::string refusal(const Json& schema) {
  try {
    compile_schema(schema);
  } catch (const SchemaError& e) {
    return e.what();
  }
  return "";
}

TEST(GrammarSchema, Scalars) {
  EXPECT_TRUE(accepts(Json{{"type", "integer"}}, "-120"));
  EXPECT_TRUE(accepts(Json{{"type", "integer"}}, "0"));
  EXPECT_FALSE(accepts(Json{{"type", "integer"}}, "012"));
  EXPECT_FALSE(accepts(Json{{"type", "integer"}}, "1.5"));
  EXPECT_FALSE(accepts(Json{{"type", "integer"}}, "1234567890123456"));  // 16 digits: past safe integers
  EXPECT_TRUE(accepts(Json{{"type", "number"}}, "1.5e-7"));
  EXPECT_TRUE(accepts(Json{{"type", "number"}}, "-0.25E+12"));
  EXPECT_FALSE(accepts(Json{{"type", "number"}}, "1e123"));
  EXPECT_FALSE(accepts(Json{{"type", "number"}}, "."));
  EXPECT_TRUE(accepts(Json{{"type", "boolean"}}, "false"));
  EXPECT_FALSE(accepts(Json{{"type", "boolean"}}, "null"));
  EXPECT_TRUE(accepts(Json{{"type", "null"}}, "null"));
  EXPECT_TRUE(accepts(Json{{"type", Json::array({"string", "null"})}}, "null"));
  EXPECT_TRUE(accepts(Json{{"type", Json::array({"string", "null"})}}, "\"x\""));
  EXPECT_FALSE(accepts(Json{{"type", Json::array({"string", "null"})}}, "1"));
  EXPECT_TRUE(accepts(Json{{"type", "string"}}, " \"leading blank\""));  // whitespace before the value
}

TEST(GrammarSchema, IntegerEnumOfHugeFloats) {
  // Whole floats are integers to JSON Schema however large (the check once cast 1e300 to int64).
  const Json s = Json::parse(R"({"type": "integer", "enum": [1e300, 2.5, 3.0]})");
  EXPECT_TRUE(accepts(s, Json::parse("1e300").dump()));
  EXPECT_TRUE(accepts(s, "3.0"));
  EXPECT_FALSE(accepts(s, "2.5"));
}

TEST(GrammarSchema, StringsEscapesAndUnicode) {
  const Json s = {{"type", "string"}};
  EXPECT_TRUE(accepts(s, R"("a \"quoted\" \\ \/ \b\f\n\r\t \u00e9 \uFFFF")"));
  EXPECT_TRUE(accepts(s, "\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\""));  // é € 😀 as raw UTF-8
  EXPECT_FALSE(accepts(s, "\"\x01\""));                                      // a raw control character
  EXPECT_FALSE(accepts(s, R"("\uD83D\uDE00")"));                             // surrogates are written raw
  EXPECT_FALSE(accepts(s, R"("\x")"));
  EXPECT_FALSE(accepts(s, "\"\xC3\x28\""));        // a broken 2-byte sequence
  EXPECT_FALSE(accepts(s, "\"\xED\xA0\x80\""));    // an encoded surrogate
  EXPECT_FALSE(accepts(s, "\"\xC0\xAF\""));        // overlong
  // Lengths count code points: 😀 and \u00e9 are one each.
  const Json bounded = {{"type", "string"}, {"minLength", 2}, {"maxLength", 3}};
  EXPECT_FALSE(accepts(bounded, "\"a\""));
  EXPECT_TRUE(accepts(bounded, "\"\xF0\x9F\x98\x80\\u00e9\""));
  EXPECT_TRUE(accepts(bounded, "\"abc\""));
  EXPECT_FALSE(accepts(bounded, "\"abcd\""));
}

TEST(GrammarSchema, Objects) {
  const Json s = Json::parse(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
    "tags":{"type":"array","items":{"type":"string"}}},"required":["name"],"additionalProperties":false})");
  EXPECT_TRUE(accepts(s, R"({"name":"a","age":3,"tags":["x","y"]})"));
  EXPECT_TRUE(accepts(s, R"({"name":"a"})"));
  EXPECT_TRUE(accepts(s, R"({"name":"a","tags":[]})"));
  EXPECT_TRUE(accepts(s, "{\n  \"name\": \"a\",\n  \"age\": 3\n}"));
  EXPECT_FALSE(accepts(s, R"({"age":3})"));              // name is required
  EXPECT_FALSE(accepts(s, R"({"name":"a","extra":1})"));  // no additional properties
  EXPECT_FALSE(accepts(s, R"({"name":"a",})"));
  EXPECT_FALSE(accepts(s, R"({"age":3,"name":"a"})"));    // written in the schema's order
  const Json optional_only = Json::parse(R"({"type":"object","properties":{"a":{"type":"null"},"b":{"type":"null"}}})");
  EXPECT_TRUE(accepts(optional_only, "{}"));
  EXPECT_TRUE(accepts(optional_only, R"({"b":null})"));
  EXPECT_TRUE(accepts(optional_only, R"({"a":null,"b":null})"));
  EXPECT_FALSE(accepts(optional_only, R"({,"b":null})"));
  // No properties: any object.
  EXPECT_TRUE(accepts(Json{{"type", "object"}}, R"({"k":[1,{"z":null}],"j":"v"})"));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"object","additionalProperties":false})"), "{}"));
  EXPECT_FALSE(accepts(Json::parse(R"({"type":"object","additionalProperties":false})"), R"({"a":1})"));
  // Keys are written JSON-escaped.
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"object","properties":{"q\"é":{"type":"null"}},"required":["q\"é"]})"),
                      "{\"q\\\"\xC3\xA9\":null}"));
}

TEST(GrammarSchema, Arrays) {
  const Json s = Json::parse(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  EXPECT_FALSE(accepts(s, "[1]"));
  EXPECT_TRUE(accepts(s, "[1, 2]"));
  EXPECT_TRUE(accepts(s, "[1,2,3]"));
  EXPECT_FALSE(accepts(s, "[1,2,3,4]"));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"array","minItems":3})"), R"([1,"a",null])"));
  EXPECT_FALSE(accepts(Json::parse(R"({"type":"array","minItems":3})"), R"([1,"a"])"));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"array","items":{"type":"boolean"}})"), "[]"));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"array","items":{"type":"boolean"}})"), "[true,false,true,true]"));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"array","maxItems":0})"), "[]"));
  EXPECT_FALSE(accepts(Json::parse(R"({"type":"array","maxItems":0})"), "[1]"));
}

TEST(GrammarSchema, EnumConstAnyOf) {
  const Json e = Json::parse(R"({"enum":["red","green",3,null,{"a":[1]}]})");
  EXPECT_TRUE(accepts(e, "\"green\""));
  EXPECT_TRUE(accepts(e, "3"));
  EXPECT_TRUE(accepts(e, "null"));
  EXPECT_TRUE(accepts(e, R"({"a":[1]})"));
  EXPECT_FALSE(accepts(e, "\"blue\""));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"string","enum":["a",1]})"), "\"a\""));
  EXPECT_FALSE(accepts(Json::parse(R"({"type":"string","enum":["a",1]})"), "1"));
  EXPECT_TRUE(accepts(Json::parse(R"({"const":"fixed"})"), "\"fixed\""));
  EXPECT_FALSE(accepts(Json::parse(R"({"const":"fixed"})"), "\"fixe\""));
  const Json any = Json::parse(R"({"anyOf":[{"type":"integer"},{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}]})");
  EXPECT_TRUE(accepts(any, "7"));
  EXPECT_TRUE(accepts(any, R"({"x":"y"})"));
  EXPECT_FALSE(accepts(any, R"("7")"));
}

TEST(GrammarSchema, RefsAndRecursion) {
  const Json tree = Json::parse(R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
    "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value","children"],
    "additionalProperties":false}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(accepts(tree, R"({"value":1,"children":[{"value":2,"children":[]},{"value":3,"children":[{"value":4,"children":[]}]}]})"));
  EXPECT_FALSE(accepts(tree, R"({"value":1,"children":[{"value":2}]})"));
  const Json linked = Json::parse(R"({"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},
    "required":["next"]})");
  EXPECT_TRUE(accepts(linked, R"({"next":{"next":{"next":null}}})"));
  EXPECT_TRUE(accepts(Json::parse(R"({"definitions":{"n":{"type":"number"}},"type":"array","items":{"$ref":"#/definitions/n"}})"),
                      "[1.5,2]"));
}

TEST(GrammarSchema, PatternsAndFormats) {
  const Json code = Json::parse(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3,4}$"})");
  EXPECT_TRUE(accepts(code, "\"AB-123\""));
  EXPECT_TRUE(accepts(code, "\"AB-1234\""));
  EXPECT_FALSE(accepts(code, "\"AB-12\""));
  EXPECT_FALSE(accepts(code, "\"ab-123\""));
  // Unanchored: the match may sit anywhere.
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"string","pattern":"ab+"})"), "\"xxabbby\""));
  EXPECT_FALSE(accepts(Json::parse(R"({"type":"string","pattern":"ab+"})"), "\"xxay\""));
  // Quotes, backslashes and control characters the pattern allows are written escaped.
  const Json esc = Json::parse(R"({"type":"string","pattern":"^[\"\\\\\\n]+$"})");
  EXPECT_TRUE(accepts(esc, R"("\"\\\n")"));
  EXPECT_FALSE(accepts(esc, "\"\n\""));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"string","pattern":"^(?:cat|dog)s?$"})"), "\"dogs\""));
  // Quantified groups nested 12 deep (X+ is built as X X*: 4096 copies of the body, closures of
  // thousands of frames) still compile and match; `a*?` (lazy) is one quantifier.
  const Json nested = Json::parse(R"({"type":"string","pattern":"^((((((((((((a|b)+)+)+)+)+)+)+)+)+)+)+)+$"})");
  EXPECT_TRUE(accepts(nested, "\"abba\""));
  EXPECT_FALSE(accepts(nested, "\"abc\""));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"string","pattern":"^a*?b$"})"), "\"aab\""));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"string","pattern":"^[^a-z]$"})"), "\"\xC3\xA9\""));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"string","pattern":"^.$"})"), "\"\xE2\x82\xAC\""));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"string","format":"date"})"), "\"2024-02-28\""));
  EXPECT_FALSE(accepts(Json::parse(R"({"type":"string","format":"date"})"), "\"2024-13-01\""));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"string","format":"date-time"})"), "\"2024-02-28T23:59:01.5Z\""));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"string","format":"uuid"})"), "\"123e4567-e89b-12d3-a456-426614174000\""));
}

TEST(GrammarSchema, AnnotationsAreIgnored) {
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"integer","description":"d","title":"t","default":1,"$schema":"x"})"), "5"));
  EXPECT_TRUE(accepts(true, "[{\"any\": \"thing\"}]"));
  EXPECT_TRUE(accepts(Json::object(), "12"));
}

TEST(GrammarSchema, RefusalsNameTheKeywordAndItsPath) {
  EXPECT_EQ(refusal(Json::parse(R"({"type":"object","properties":{"a":{"type":"integer","minimum":0}}})")),
            "$.properties.a.minimum: keyword 'minimum' is not supported");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"array","items":{"oneOf":[]}})")), "$.items.oneOf: keyword 'oneOf' is not supported");
  EXPECT_EQ(refusal(Json::parse(R"({"anyOf":[{"type":"string"},{"not":{}}]})")), "$.anyOf[1].not: keyword 'not' is not supported");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"bogus"})")), "$.type: 'type' must name a JSON Schema type");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"string","minLength":3,"maxLength":2})")), "$.minLength: 'minLength' is above 'maxLength'");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"string","maxLength":100000})")), "$.maxLength: 'maxLength' above 256 is not supported");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"object","properties":{},"required":["x"]})")),
            "$.required[0]: required property 'x' is not in 'properties'");
  EXPECT_EQ(refusal(Json::parse(R"({"$ref":"#/$defs/missing"})")),
            "$.$ref: '$ref' '#/$defs/missing' names no schema here (only #, #/$defs/NAME, #/definitions/NAME)");
  EXPECT_EQ(refusal(Json::parse(R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})")),
            "$.$defs.a: the schema refers to itself ($ref) before any value is written (left recursion)");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"string","format":"email"})")),
            "$.format: format 'email' is not supported (date, time, date-time, uuid)");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"string","pattern":"(?=a)b"})")),
            "$.pattern: pattern: lookaround and named groups are not supported (at offset 1)");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"string","pattern":"a\\1"})")), "$.pattern: pattern: the escape \\1 is not supported (at offset 3)");
  // ECMA-262 has no stacked quantifiers; the grammar fuzzer's `(a...|b)*+++...` took minutes before.
  EXPECT_EQ(refusal(Json::parse(R"({"type":"string","pattern":"a++"})")),
            "$.pattern: pattern: a quantifier on a quantifier (ECMA-262 has no possessive or stacked quantifiers) (at offset 2)");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"string","pattern":"^(atttttttttttt|b)*+++++++++++#++++++"})")),
            "$.pattern: pattern: a quantifier on a quantifier (ECMA-262 has no possessive or stacked quantifiers) (at offset 19)");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"string","pattern":"a{2}*"})")),
            "$.pattern: pattern: a quantifier on a quantifier (ECMA-262 has no possessive or stacked quantifiers) (at offset 4)");
  EXPECT_EQ(refusal(false), "$: the schema false matches nothing");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"string","enum":[1,2]})")), "$.enum: no value here has the schema's type");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"string","$ref":"#"})")), "$.type: keyword 'type' beside '$ref' is not supported");
  EXPECT_EQ(refusal(Json::parse(R"({"type":"object","additionalProperties":{"type":"string"}})")),
            "$.additionalProperties: 'additionalProperties' other than true or false is not supported");
}

// The mask from the cache plus the uncertain walk must equal, token for token, what advancing a
// fresh matcher over the same bytes says (brute force), on a vocabulary of multi-byte JSON pieces.
TEST(GrammarMask, EqualsBruteForceOnEveryStep) {
  std::vector<std::string> extra = {"{\"", "\":", "\",", "\"}", "}}", "]}", "},{", "\"name", "name", "\":\"", "true",
                                    "null,", "12", "3.", "e5", "\\u00", "\\n", "é", "\xE2\x82", "\xAC\"", ", \"", "[\"",
                                    "\"]", "\n  ", "  ", "fa", "lse", "\"a\"", ",\"tags\":[", "-0", "00", "\\", "\"\"}"};
  const Vocabulary v = byte_vocabulary(extra);
  const Json s = Json::parse(R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},
    "ok":{"type":["boolean","null"]},"n":{"type":"number"},"tags":{"type":"array","items":{"enum":["a","b\n"]},"maxItems":3},
    "kid":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["name"],"additionalProperties":false})");
  auto g = std::make_shared<const CompiledGrammar>(compile_schema(s), v);
  std::mt19937 rng(7);
  for (int run = 0; run < 12; ++run) {
    Matcher m(g);
    std::string text;
    std::vector<uint32_t> mask(size_t(v.trie.mask_words()));
    for (int step = 0; step < 80 && !m.done(); ++step) {
      const int allowed = m.fill_mask(mask);
      ASSERT_GT(allowed, 0) << "empty mask after " << text;
      std::vector<int32_t> ok;
      for (int32_t id = 0; id < v.trie.vocab(); ++id) {
        const bool bit = mask[size_t(id) / 32] >> (id % 32) & 1u;
        Matcher fresh(g);
        bool brute = fresh.advance_bytes(text);
        ASSERT_TRUE(brute);
        brute = fresh.advance(id);
        ASSERT_EQ(bit, brute) << "token " << id << " '" << v.trie.token_bytes(id) << "' after '" << text << "'";
        if (bit) ok.push_back(id);
      }
      const int32_t pick = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
      ASSERT_TRUE(m.advance(pick));
      text += v.trie.token_bytes(pick);
    }
  }
}

// On the real Qwen vocabulary (151k tokens), random walks under agent-like schemas always find a
// token, end only when the text is complete, and produce JSON that parses.
TEST(GrammarMask, NeverEmptyOnTheQwenVocabulary) {
  const Tokenizer& tok = test::qwen();
  Vocabulary v{TokenTrie::build(tok, 151936), {*tok.token_id("<|im_end|>")}};
  GrammarCache cache(std::move(v));
  const Json schemas[] = {
      Json::parse(R"({"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]},
        "days":{"type":"integer"},"alerts":{"type":"array","items":{"type":"object","properties":{"level":{"type":"string","maxLength":8},
        "note":{"type":["string","null"]}},"required":["level","note"],"additionalProperties":false}}},
        "required":["city","unit","days","alerts"],"additionalProperties":false})"),
      Json(nullptr),  // json_object
      Json::parse(R"({"type":"string","pattern":"^[a-z]+-[0-9]{2}$"})"),
  };
  std::mt19937 rng(11);
  std::vector<uint32_t> mask(size_t(cache.vocabulary().trie.mask_words()));
  int completed = 0;
  for (const Json& s : schemas) {
    const auto g = cache.get(s);
    for (int run = 0; run < 6; ++run) {
      Matcher m(g);
      std::string text;
      for (int step = 0; step < 300 && !m.done(); ++step) {
        const int n = m.fill_mask(mask);
        ASSERT_GT(n, 0) << "empty mask after " << text;
        // Prefer closing tokens now and then so that walks finish: any allowed token is valid.
        std::vector<int32_t> ok;
        for (int32_t id = 0; id < 151936; ++id)
          if (mask[size_t(id) / 32] >> (id % 32) & 1u) ok.push_back(id);
        int32_t pick = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
        if (step > 40)
          for (int32_t id : ok)
            if (tok.token_bytes(id).find_first_of("\"}]") != std::string_view::npos || id == cache.vocabulary().eos[0]) {
              if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) { pick = id; break; }
            }
        ASSERT_TRUE(m.advance(pick));
        if (!m.done()) text += tok.token_bytes(pick);
      }
      if (!m.done()) continue;
      ++completed;
      ASSERT_TRUE(test::valid_utf8(text)) << text;
      const Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(parsed.is_discarded()) << text;
      if (s.is_null()) {
        EXPECT_TRUE(parsed.is_object()) << text;
      }
    }
  }
  EXPECT_GE(completed, 9);
}

// check()'s edge visits per node or edge of the automaton, at most. Measured 2.6 for objects of 100 to
// 3,000 required properties (1.05M nodes and edges at 3,000); the fixpoint sweep it replaced took ~3,000.
constexpr uint64_t kCheckVisitsPerEdge = 4;

// Thousands of alternatives at one point, found by tests/e2e/hostile.py against the server.
Json many_properties(int n, bool required) {
  Json props = Json::object(), names = Json::array();
  for (int i = 0; i < n; ++i) props["p" + std::to_string(i)] = Json{{"type", "string"}}, names.push_back("p" + std::to_string(i));
  Json s = {{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
  if (required) s["required"] = names;
  return s;
}

TEST(GrammarSchema, ManyRequiredPropertiesCompileInLinearTime) {
  // Automaton::check settled productive nodes by sweeping all nodes per property (71 s at 3,000, on an
  // HTTP thread): now one pass over reversed edges. The bound is on check()'s own count of edge visits,
  // not on time, so it holds on any machine under any load: twice the properties may take about twice
  // the visits (a sweep per property took four times as many), and the visits stay a small multiple of
  // the automaton's size (the sweep took ~property count times it).
  const auto half = compile_schema(many_properties(1500, true));
  const auto full = compile_schema(many_properties(3000, true));
  const uint64_t half_work = half->check(), full_work = full->check();
  EXPECT_LE(full_work, kCheckVisitsPerEdge * full->size()) << full_work << " visits for " << full->size() << " nodes and edges";
  EXPECT_LT(double(full_work) / double(half_work), 2.2) << half_work << " visits at 1,500 properties, " << full_work << " at 3,000";
  const Json s = many_properties(3000, true);
  std::string text = "{";
  for (int i = 0; i < 3000; ++i) text += (i ? ",\"p" : "\"p") + std::to_string(i) + "\":\"x\"";
  text += "}";
  EXPECT_TRUE(accepts(s, text));
  EXPECT_FALSE(accepts(s, text.substr(0, text.find(",\"p2999\"")) + "}"));  // the last one missing
}

TEST(GrammarSchema, HugeEnumIsRefusedAtCompile) {
  Json values = Json::array();
  for (int i = 0; i < 100000; ++i) values.push_back("v" + std::to_string(i));
  EXPECT_NE(refusal(Json{{"enum", values}}).find("too large to compile"), std::string::npos);
}

TEST(GrammarMask, TooComplexAMaskIsRefusedNotComputed) {
  // An object of 3,000 optional properties offers 3,000 keys after each member: on the Qwen vocabulary
  // a mask there costs ~0.2-0.4 s of the engine loop, and a walk into it soon meets one past
  // Matcher::kMaskWork, which fill_mask refuses instead of finishing. A walk over ten properties never
  // comes near the budget.
  const Tokenizer& tok = test::qwen();
  std::vector<uint32_t> mask(size_t(TokenTrie::build(tok, 151936).mask_words()));
  auto walk = [&](const Json& schema, uint64_t& largest) {
    GrammarCache cache(Vocabulary{TokenTrie::build(tok, 151936), {*tok.token_id("<|im_end|>")}});
    Matcher m(cache.get(schema));
    std::mt19937 rng(7);
    largest = 0;
    for (int step = 0; step < 64 && !m.done(); ++step) {
      const int n = m.fill_mask(mask);
      largest = std::max(largest, m.last_work());
      if (n <= 0) return n;
      std::vector<int32_t> text;  // allowed tokens that are not only whitespace: into the object
      for (int32_t id = 0; id < 151936; ++id)
        if (mask[size_t(id) / 32] >> (id % 32) & 1u)
          if (const std::string_view b = tok.token_bytes(id); b.find_first_not_of(" \t\n\r") != std::string_view::npos)
            text.push_back(id);
      if (text.empty()) break;
      EXPECT_TRUE(m.advance(text[std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng)]));
    }
    return 1;
  };
  uint64_t largest = 0;
  EXPECT_EQ(walk(many_properties(3000, false), largest), Matcher::kTooComplex);
  EXPECT_GT(largest, Matcher::kMaskWork);
  EXPECT_EQ(walk(many_properties(10, false), largest), 1);
  EXPECT_LT(largest, Matcher::kMaskWork);
}

TEST(GrammarMask, EosOnlyWhenComplete) {
  auto g = std::make_shared<const CompiledGrammar>(compile_schema(Json{{"type", "boolean"}}), bytes_only());
  Matcher m(g);
  const int32_t eos = bytes_only().eos[0];
  std::vector<uint32_t> mask(size_t(bytes_only().trie.mask_words()));
  m.fill_mask(mask);
  EXPECT_FALSE(mask[size_t(eos) / 32] >> (eos % 32) & 1u);
  EXPECT_FALSE(m.advance(eos));
  ASSERT_TRUE(m.advance_bytes("true"));
  EXPECT_EQ(m.fill_mask(mask), 1);  // only eos
  EXPECT_TRUE(mask[size_t(eos) / 32] >> (eos % 32) & 1u);
  EXPECT_TRUE(m.advance(eos));
  EXPECT_TRUE(m.done());
}

// Speculative decoding steps the matcher through drafts and comes back: after restore() the parse
// (masks, position, accepting, done) is the checkpoint's, whatever was taken in between, eos included.
TEST(GrammarMask, CheckpointRestoresTheParse) {
  auto g = std::make_shared<const CompiledGrammar>(
      compile_schema(Json::parse(R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
                                     "required": ["a"]})")),
      bytes_only());
  const size_t words = size_t(bytes_only().trie.mask_words());
  std::vector<uint32_t> before(words), after(words);
  Matcher m(g);
  ASSERT_TRUE(m.advance_bytes(R"({"a": [1, )"));
  const int n = m.fill_mask(before);
  const size_t position = m.position();
  Matcher::Checkpoint back = m.checkpoint();
  ASSERT_TRUE(m.advance_bytes("23]}"));
  ASSERT_TRUE(m.accepting());
  ASSERT_TRUE(m.advance(bytes_only().eos[0]));
  ASSERT_TRUE(m.done());
  m.restore(std::move(back));
  EXPECT_FALSE(m.done());
  EXPECT_FALSE(m.accepting());
  EXPECT_EQ(m.position(), position);
  EXPECT_EQ(m.fill_mask(after), n);
  EXPECT_EQ(after, before);
  EXPECT_FALSE(m.advance_bytes("]"));  // a number is still due after "1, "
  EXPECT_TRUE(m.advance_bytes("4]}"));
  EXPECT_TRUE(m.accepting());
}

// A caller that can do without the mask asks less work: the same state is too complex for it.
TEST(GrammarMask, ASmallerBudgetRefusesEarlier) {
  auto g = std::make_shared<const CompiledGrammar>(compile_schema(many_properties(200, false)), bytes_only());
  std::vector<uint32_t> mask(size_t(bytes_only().trie.mask_words()));
  Matcher full(g), small(g);
  ASSERT_TRUE(full.advance_bytes("{"));
  ASSERT_TRUE(small.advance_bytes("{"));
  ASSERT_GT(full.fill_mask(mask), 0);
  ASSERT_GT(full.last_work(), 64u);
  EXPECT_EQ(small.fill_mask(mask, 8), Matcher::kTooComplex);
}

TEST(GrammarMask, MaskLogits) {
  std::vector<float> logits = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                               21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34};
  const uint32_t mask[2] = {0x80000001u, 0x2u};
  mask_logits(mask, logits.data(), int(logits.size()));
  for (int t = 0; t < int(logits.size()); ++t) {
    const bool kept = t == 0 || t == 31 || t == 33;
    EXPECT_EQ(std::isinf(logits[size_t(t)]), !kept) << t;
  }
}

}  // namespace
}  // namespace rocket::grammar
