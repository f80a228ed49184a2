// OutputParser: reasoning, content and Qwen tool calls separated from a streamed output. Outputs are
// tokenized with the real Qwen3 tokenizer and fed back one token at a time through StreamDecoder, as
// the server does, so pieces end inside multi-byte characters (emoji and CJK are split across byte
// tokens) and, where the ids are built from fragments, inside tags. Every output is also re-fed at
// every split point and one character at a time, and must parse the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai/openai_response.h"
#include "openai/output_parser.h"
#include "openai/prompt_builder.h"
#include "openai/tool_call_format.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

#include "qwen_fixtures.h"

namespace rocket {
namespace {

using Json = nlohmann::ordered_json;
using Options = OutputParser::Options;

using test::qwen;
using test::valid_utf8;

// Ids for `fragments`, each tokenized on its own: a tag split over two fragments becomes several
// ordinary tokens, as a model can emit it.
std::vector<int32_t> ids_of(const std::vector<std::string>& fragments) {
  std::vector<int32_t> ids;
  for (const std::string& f : fragments) {
    const std::vector<int32_t> part = qwen().encode(f);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

struct Parsed {
  AssistantTurn turn;
  int tool_calls = 0;
  bool complete = false;
  std::vector<OutputEvent> events;
  size_t held_partial_chars = 0;  // pieces that ended inside a multi-byte character
};

void take(Parsed& p, std::vector<OutputEvent> events) {
  for (OutputEvent& e : events) {
    if (const auto* c = std::get_if<ContentDelta>(&e)) {
      EXPECT_FALSE(c->text.empty());
      EXPECT_TRUE(valid_utf8(c->text)) << c->text;
    }
    if (const auto* r = std::get_if<ReasoningDelta>(&e)) {
      EXPECT_FALSE(r->text.empty());
      EXPECT_TRUE(valid_utf8(r->text)) << r->text;
    }
    p.turn.add(e);
    p.events.push_back(std::move(e));
  }
}

// Feeds the ids one at a time through a StreamDecoder into a parser.
Parsed run_ids(const std::vector<int32_t>& ids, Options options = {}, uint64_t seed = 1) {
  Parsed p;
  StreamDecoder decoder(qwen());
  OutputParser parser(options, std::mt19937_64(seed));
  for (int32_t id : ids) {
    const std::string piece = decoder.push(id);
    EXPECT_TRUE(valid_utf8(piece));
    if (decoder.pending_bytes() > 0) ++p.held_partial_chars;
    take(p, parser.push(piece));
  }
  take(p, parser.push(decoder.flush()));
  take(p, parser.finish());
  p.tool_calls = parser.tool_calls();
  p.complete = parser.complete();
  return p;
}

Parsed run_text(const std::string& output, Options options = {}) { return run_ids(qwen().encode(output), options); }

// Feeds `pieces` directly.
Parsed run_pieces(const std::vector<std::string>& pieces, Options options = {}) {
  Parsed p;
  OutputParser parser(options, std::mt19937_64(1));
  for (const std::string& piece : pieces) take(p, parser.push(piece));
  take(p, parser.finish());
  p.tool_calls = parser.tool_calls();
  p.complete = parser.complete();
  return p;
}

size_t char_len(uint8_t lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

void expect_same(const Parsed& a, const Parsed& b, const std::string& how) {
  SCOPED_TRACE(how);
  EXPECT_EQ(a.turn.content, b.turn.content);
  EXPECT_EQ(a.turn.reasoning_content, b.turn.reasoning_content);
  ASSERT_EQ(a.turn.tool_calls.size(), b.turn.tool_calls.size());
  for (size_t i = 0; i < a.turn.tool_calls.size(); ++i) {
    EXPECT_EQ(a.turn.tool_calls[i].id, b.turn.tool_calls[i].id);
    EXPECT_EQ(a.turn.tool_calls[i].name, b.turn.tool_calls[i].name);
    EXPECT_EQ(a.turn.tool_calls[i].arguments, b.turn.tool_calls[i].arguments);
  }
  EXPECT_EQ(a.tool_calls, b.tool_calls);
  EXPECT_EQ(a.complete, b.complete);
}

// The same result however the text is cut: at every character boundary into two pieces, and one
// character per piece.
void expect_split_invariant(const std::string& output, const Options& options, const Parsed& whole) {
  std::vector<size_t> bounds;
  for (size_t i = 0; i < output.size(); i += char_len(uint8_t(output[i]))) bounds.push_back(i);
  for (size_t cut : bounds) {
    expect_same(run_pieces({output.substr(0, cut), output.substr(cut)}, options), whole,
                "split at byte " + std::to_string(cut));
  }
  std::vector<std::string> chars;
  for (size_t i = 0; i < bounds.size(); ++i) {
    chars.push_back(output.substr(bounds[i], (i + 1 < bounds.size() ? bounds[i + 1] : output.size()) - bounds[i]));
  }
  expect_same(run_pieces(chars, options), whole, "one character per piece");
}

TEST(OutputParser, ReasoningThenContent) {
  const std::string out = "<think>\n让我想想 🤔 — the user asks 6×7.\n\nIt is 42.\n</think>\n\nThe answer is **42** 😀.";
  const Parsed p = run_text(out);
  EXPECT_EQ(p.turn.reasoning_content, "让我想想 🤔 — the user asks 6×7.\n\nIt is 42.");
  EXPECT_EQ(p.turn.content, "The answer is **42** 😀.");
  EXPECT_EQ(p.tool_calls, 0);
  EXPECT_GT(p.held_partial_chars, 0u) << "no token ended inside a character; the test lost its point";
  // Reasoning events all come before content events.
  bool seen_content = false;
  for (const OutputEvent& e : p.events) {
    if (std::holds_alternative<ContentDelta>(e)) seen_content = true;
    if (std::holds_alternative<ReasoningDelta>(e)) {
      EXPECT_FALSE(seen_content);
    }
  }
  expect_split_invariant(out, {}, p);
}

TEST(OutputParser, ThinkingDisabledIsAllContent) {
  // With enable_thinking=false the template closes an empty think block in the prompt.
  const std::string out = "Hello 世界 👋🏽! 1 < 2 and x<y, but not <think>.";
  const Parsed p = run_text(out);
  EXPECT_EQ(p.turn.content, out);
  EXPECT_EQ(p.turn.reasoning_content, "");
  expect_split_invariant(out, {}, p);
}

TEST(OutputParser, EmptyThinkBlock) {
  const Parsed p = run_text("<think>\n\n</think>\n\nJust the answer.");
  EXPECT_EQ(p.turn.reasoning_content, "");
  EXPECT_EQ(p.turn.content, "Just the answer.");
  for (const OutputEvent& e : p.events) EXPECT_FALSE(std::holds_alternative<ReasoningDelta>(e));
}

TEST(OutputParser, PromptOpenedThink) {
  const std::string out = "The user wants 🍣 in 東京.\n</think>\n\nSure: 寿司 🍣.";
  const Options opened{.reasoning_open = true};
  const Parsed p = run_text(out, opened);
  EXPECT_EQ(p.turn.reasoning_content, "The user wants 🍣 in 東京.");
  EXPECT_EQ(p.turn.content, "Sure: 寿司 🍣.");
  expect_split_invariant(out, opened, p);
  // Without the flag, the same output is content up to a stray </think>.
  EXPECT_EQ(run_text(out).turn.content, out);
}

TEST(OutputParser, ReasoningThenTwoToolCalls) {
  const std::string out =
      "<think>\nNeed the weather in 東京 🗼 and the time in Paris.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\", \"city\": \"東京\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\", \"fmt\": {\"h24\": true}}}\n"
      "</tool_call>";
  const Parsed p = run_text(out);
  EXPECT_EQ(p.turn.reasoning_content, "Need the weather in 東京 🗼 and the time in Paris.");
  EXPECT_EQ(p.turn.content, "");
  ASSERT_EQ(p.tool_calls, 2);
  ASSERT_EQ(p.turn.tool_calls.size(), 2u);
  EXPECT_EQ(p.turn.tool_calls[0].name, "get_weather");
  // Compact, in the model's key order.
  EXPECT_EQ(p.turn.tool_calls[0].arguments, R"({"unit":"celsius","city":"東京"})");
  EXPECT_EQ(p.turn.tool_calls[1].name, "get_time");
  EXPECT_EQ(p.turn.tool_calls[1].arguments, R"({"tz":"Europe/Paris","fmt":{"h24":true}})");
  for (const ToolCall& c : p.turn.tool_calls) {
    ASSERT_EQ(c.id.size(), 5u + 24u);
    EXPECT_EQ(c.id.substr(0, 5), "call_");
    for (char ch : c.id.substr(5)) EXPECT_TRUE(std::isalnum(uint8_t(ch))) << c.id;
  }
  EXPECT_NE(p.turn.tool_calls[0].id, p.turn.tool_calls[1].id);
  // OpenAI's stream shape: start (id + name) then the arguments, per call, in order.
  std::vector<std::string> shape;
  for (const OutputEvent& e : p.events) {
    if (const auto* s = std::get_if<ToolCallStart>(&e)) shape.push_back("start" + std::to_string(s->index));
    if (const auto* a = std::get_if<ToolCallArgumentsDelta>(&e)) shape.push_back("args" + std::to_string(a->index));
  }
  EXPECT_EQ(shape, (std::vector<std::string>{"start0", "args0", "start1", "args1"}));
  // Ids come from the seeded generator: the same seed gives the same ids, another seed others.
  EXPECT_EQ(run_text(out).turn.tool_calls[0].id, p.turn.tool_calls[0].id);
  EXPECT_NE(run_ids(qwen().encode(out), {}, 2).turn.tool_calls[0].id, p.turn.tool_calls[0].id);
  expect_split_invariant(out, {}, p);
}

TEST(OutputParser, ContentBeforeAndAfterToolCall) {
  const std::string out =
      "Let me check 🌦️ for you.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}\n"
      "</tool_call>\nDone.";
  const Parsed p = run_text(out);
  EXPECT_EQ(p.turn.content, "Let me check 🌦️ for you.Done.");
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  EXPECT_EQ(p.turn.tool_calls[0].arguments, R"({"city":"Zürich"})");
  expect_split_invariant(out, {}, p);
}

TEST(OutputParser, MissingArgumentsAreEmptyObject) {
  const Parsed p = run_text("<tool_call>\n{\"name\": \"list_files\"}\n</tool_call>");
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  EXPECT_EQ(p.turn.tool_calls[0].arguments, "{}");
}

TEST(OutputParser, MalformedBlocksAreContent) {
  const std::vector<std::string> blocks = {
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京\"}\n</tool_call>",  // brace missing
      "<tool_call>\n{\"arguments\": {\"city\": \"東京\"}}\n</tool_call>",                           // no name
      "<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>",                                // name not a string
      "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>",            // arguments a string
      "<tool_call>\n[\"f\", {}]\n</tool_call>",                                                    // not an object
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}} trailing 🙃\n</tool_call>",                // trailing text
      "<tool_call></tool_call>",                                                                    // empty
  };
  for (const std::string& block : blocks) {
    SCOPED_TRACE(block);
    const Parsed p = run_text(block);
    EXPECT_EQ(p.tool_calls, 0);
    EXPECT_TRUE(p.turn.tool_calls.empty());
    EXPECT_EQ(p.turn.content, block);
    expect_split_invariant(block, {}, p);
  }
}

TEST(OutputParser, MalformedBlockBetweenValidOnes) {
  const std::string out =
      "<think>\nTwo calls.\n</think>\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": {oops}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"c\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>";
  const Parsed p = run_text(out);
  EXPECT_EQ(p.turn.reasoning_content, "Two calls.");
  ASSERT_EQ(p.turn.tool_calls.size(), 2u);
  EXPECT_EQ(p.turn.tool_calls[0].name, "a");
  EXPECT_EQ(p.turn.tool_calls[1].name, "c");
  EXPECT_EQ(p.turn.tool_calls[1].arguments, R"({"x":[1,2]})");
  // Indices stay dense: the malformed block is not a call.
  EXPECT_EQ(std::get<ToolCallStart>(p.events[p.events.size() - 2]).index, 1);
  // Verbatim, less the newline right before the next (valid) call.
  EXPECT_EQ(p.turn.content, "<tool_call>\n{\"name\": \"b\", \"arguments\": {oops}}\n</tool_call>");
  expect_split_invariant(out, {}, p);
}

TEST(OutputParser, UnterminatedBlockIsContent) {
  // max_tokens cut the call short.
  const std::string out = "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Be";
  const Parsed p = run_text(out);
  EXPECT_EQ(p.tool_calls, 0);
  EXPECT_EQ(p.turn.content, out);
  expect_split_invariant(out, {}, p);
}

TEST(OutputParser, ToolCallsDisabled) {
  const std::string out = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  const Parsed p = run_text(out, {.tool_calls = false});
  EXPECT_EQ(p.tool_calls, 0);
  EXPECT_EQ(p.turn.content, out);
}

TEST(OutputParser, ToolCallInsideReasoningIsReasoning) {
  const std::string out = "<think>\nI could emit <tool_call> now.\n</think>\n\nNo call needed.";
  const Parsed p = run_text(out);
  EXPECT_EQ(p.turn.reasoning_content, "I could emit <tool_call> now.");
  EXPECT_EQ(p.turn.content, "No call needed.");
  EXPECT_EQ(p.tool_calls, 0);
}

TEST(OutputParser, TagsSplitAcrossTokens) {
  // Every tag spelled by several ordinary tokens, next to CJK and emoji.
  const std::vector<std::string> fragments = {
      "<thi", "nk>\n思考中 🤔", "…\n</th", "ink>\n\n好的 👍🏽 <tool", "_call>\n{\"name\": \"翻訳\", \"arguments\": ",
      "{\"text\": \"猫 🐈\"}}\n</tool_", "call>"};
  std::string out;
  for (const std::string& f : fragments) out += f;
  const std::vector<int32_t> ids = ids_of(fragments);
  // The tags really are split: none of the added tag tokens occurs.
  for (const char* tag : {"<think>", "</think>", "<tool_call>", "</tool_call>"}) {
    const int32_t tag_id = *qwen().token_id(tag);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), tag_id), 0) << tag;
  }
  const Parsed p = run_ids(ids);
  EXPECT_EQ(p.turn.reasoning_content, "思考中 🤔…");
  EXPECT_EQ(p.turn.content, "好的 👍🏽 ");
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  EXPECT_EQ(p.turn.tool_calls[0].name, "翻訳");
  EXPECT_EQ(p.turn.tool_calls[0].arguments, R"({"text":"猫 🐈"})");
  // The same text with the tags as single added tokens parses the same.
  expect_same(run_text(out), p, "canonical tokenization");
  expect_split_invariant(out, {}, p);
}

TEST(OutputParser, HoldsBackOnlyAPossibleTag) {
  OutputParser parser({}, std::mt19937_64(1));
  auto content = [](const std::vector<OutputEvent>& events) {
    std::string s;
    for (const OutputEvent& e : events) s += std::get<ContentDelta>(e).text;
    return s;
  };
  EXPECT_EQ(content(parser.push("Answer 答")), "Answer 答");
  EXPECT_EQ(content(parser.push("x <tool_ca")), "x ");     // "<tool_ca" may still be a tag
  EXPECT_EQ(content(parser.push("t and <")), "<tool_cat and ");
  EXPECT_EQ(content(parser.push("b>")), "<b>");
  // Content came first, so <think> is no longer a tag: nothing waits for the ">".
  EXPECT_EQ(content(parser.push("<think")), "<think");
  EXPECT_EQ(content(parser.push(">")), ">");
  EXPECT_EQ(content(parser.push(" end <")), " end ");
  EXPECT_EQ(content(parser.finish()), "<");
}

TEST(OutputParser, NewlinesBeforeAToolCallAreHeldThenDropped) {
  OutputParser parser({}, std::mt19937_64(1));
  std::vector<OutputEvent> e = parser.push("Calling.\n\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(std::get<ContentDelta>(e[0]).text, "Calling.");
  e = parser.push("\nmore\n");  // text follows: the held newlines were text after all
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(std::get<ContentDelta>(e[0]).text, "\n\n\nmore");
  EXPECT_TRUE(parser.push("<tool_call>{\"name\": \"f\"}").empty());
  e = parser.push("</tool_call>");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(std::get<ToolCallStart>(e[0]).name, "f");
  EXPECT_EQ(std::get<ToolCallArgumentsDelta>(e[1]).fragment, "{}");
  EXPECT_TRUE(parser.finish().empty());
}

TEST(OutputParser, ContentEndingInNewlinesKeepsThem) {
  const std::string out = "```\ncode\n```\n";
  EXPECT_EQ(run_text(out).turn.content, out);
}

TEST(OutputParser, ReasoningCutByLength) {
  const Parsed p = run_text("<think>\nStill thinking about 🧩\n");
  EXPECT_EQ(p.turn.reasoning_content, "Still thinking about 🧩");
  EXPECT_EQ(p.turn.content, "");
}

TEST(OutputParser, PrimedForcedToolCall) {
  // tool_choice naming a function: the prompt was prefilled with the start of the call.
  OutputParser parser({}, std::mt19937_64(1));
  parser.prime("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  Parsed p;
  StreamDecoder decoder(qwen());
  for (int32_t id : qwen().encode("{\"city\": \"Oslo\"}}\n</tool_call>")) take(p, parser.push(decoder.push(id)));
  take(p, parser.finish());
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  EXPECT_EQ(p.turn.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.turn.tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(p.turn.content, "");
}

TEST(OutputParser, ArgumentFragmentsConcatenateToTheArguments) {
  const std::string args = R"({"query": "ünïcödé \"quoted\" \\ 🎉", "n": 3, "nested": {"a": [true, null, 1.5]}})";
  const Parsed p = run_text("<tool_call>\n{\"name\": \"search\", \"arguments\": " + args + "}\n</tool_call>");
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  std::string joined;
  for (const OutputEvent& e : p.events) {
    if (const auto* a = std::get_if<ToolCallArgumentsDelta>(&e)) joined += a->fragment;
  }
  EXPECT_EQ(joined, p.turn.tool_calls[0].arguments);
  EXPECT_EQ(Json::parse(joined), Json::parse(args));
}

TEST(OutputParser, OneCallAllowedEndsTheTurnAtIt) {
  // parallel_tool_calls=false: the second call, and the text after it, are not part of the turn.
  const std::string out =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"Europe/Paris\"}}\n</tool_call>\nDone.";
  const Options one{.max_tool_calls = 1};
  const Parsed p = run_text(out, one);
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  EXPECT_EQ(p.turn.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.turn.tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(p.turn.content, "");
  EXPECT_EQ(p.events.size(), 2u);  // the call's start and its arguments, nothing after
  EXPECT_TRUE(p.complete);
  expect_split_invariant(out, one, p);  // also when one piece holds both calls

  const Parsed unlimited = run_text(out);
  EXPECT_EQ(unlimited.turn.tool_calls.size(), 2u);
  EXPECT_FALSE(unlimited.complete);
}

TEST(OutputParser, OnlyAValidCallOutsideReasoningCountsTowardsTheLimit) {
  const std::string out =
      "<think>\nMaybe <tool_call>\n{\"name\": \"get_time\"}\n</tool_call> first.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": }\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const Options one{.max_tool_calls = 1};
  const Parsed p = run_text(out, one);
  EXPECT_EQ(p.turn.reasoning_content, "Maybe <tool_call>\n{\"name\": \"get_time\"}\n</tool_call> first.");
  EXPECT_EQ(p.turn.content, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": }\n</tool_call>");
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  EXPECT_EQ(p.turn.tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_TRUE(p.complete);
  expect_split_invariant(out, one, p);
}

TEST(OutputParser, TurnWithoutTheAllowedCallsIsNotComplete) {
  const Parsed p = run_text("<tool_call>\n{\"name\": \"f\"}\n</tool_call>\nThen text.", Options{.max_tool_calls = 2});
  EXPECT_EQ(p.tool_calls, 1);
  EXPECT_EQ(p.turn.content, "Then text.");
  EXPECT_FALSE(p.complete);
}

// ---------------------------------------------------------------------------------------------------
// Qwen3.5's XML tool-call format

Options xml_options(const std::vector<Tool>& tools) {
  Options o;
  o.format = ToolCallFormat::kXml;
  o.parameters = std::make_shared<const ParameterTypes>(parameter_types(tools));
  return o;
}

std::vector<Tool> xml_tools() {
  Tool edit;
  edit.name = "edit_file";
  edit.parameters = Json::parse(R"({"type": "object", "properties": {
      "path": {"type": "string"}, "text": {"type": "string"}, "line": {"type": "integer"},
      "options": {"type": "object"}, "tags": {"type": "array", "items": {"type": "string"}},
      "ratio": {"type": ["number", "null"]}, "dry_run": {"type": "boolean"}}})");
  Tool weather;
  weather.name = "get_weather";
  weather.parameters = Json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}})");
  return {edit, weather};
}

TEST(OutputParserXml, TypedParametersInTheModelsOrder) {
  const std::string out =
      "I will edit it.\n<tool_call>\n<function=edit_file>\n<parameter=path>\nsrc/main.cc\n</parameter>\n"
      "<parameter=text>\nint main() {\n  return 0;\n}\n\n</parameter>\n<parameter=line>\n12\n</parameter>\n"
      "<parameter=options>\n{\"force\": true, \"mode\": \"a\"}\n</parameter>\n<parameter=tags>\n[\"x\", \"y\"]\n</parameter>\n"
      "<parameter=ratio>\nnull\n</parameter>\n<parameter=dry_run>\nfalse\n</parameter>\n<parameter=extra>\n7\n</parameter>\n"
      "</function>\n</tool_call>";
  const Options o = xml_options(xml_tools());
  const Parsed p = run_text(out, o);
  EXPECT_EQ(p.turn.content, "I will edit it.");
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  EXPECT_EQ(p.turn.tool_calls[0].name, "edit_file");
  // A string keeps its inner newlines (the block's one leading and trailing newline removed); an
  // undeclared parameter stays a string; the object lists parameters as written.
  EXPECT_EQ(p.turn.tool_calls[0].arguments,
            R"({"path":"src/main.cc","text":"int main() {\n  return 0;\n}\n","line":12,"options":{"force":true,"mode":"a"},)"
            R"("tags":["x","y"],"ratio":null,"dry_run":false,"extra":"7"})");
  expect_split_invariant(out, o, p);
}

TEST(OutputParserXml, ValuesThatDoNotParseStayStrings) {
  const Parsed p = run_text("<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n"
                            "<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
                            xml_options(xml_tools()));
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  EXPECT_EQ(p.turn.tool_calls[0].arguments, R"({"city":"42","days":"three"})");
  // Without the tools' schemas (or an unknown function) every value is a string.
  const Parsed q = run_text("<tool_call>\n<function=other>\n<parameter=n>\n5\n</parameter>\n</function>\n</tool_call>",
                            xml_options(xml_tools()));
  ASSERT_EQ(q.turn.tool_calls.size(), 1u);
  EXPECT_EQ(q.turn.tool_calls[0].arguments, R"({"n":"5"})");
}

TEST(OutputParserXml, TwoCallsAndACallWithoutParameters) {
  const std::string out = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
                          "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=now>\n</function>\n</tool_call>";
  const Options o = xml_options(xml_tools());
  const Parsed p = run_text(out, o);
  EXPECT_EQ(p.turn.content, "");
  ASSERT_EQ(p.turn.tool_calls.size(), 2u);
  EXPECT_EQ(p.turn.tool_calls[0].arguments, R"({"city":"Paris","days":3})");
  EXPECT_EQ(p.turn.tool_calls[1].name, "now");
  EXPECT_EQ(p.turn.tool_calls[1].arguments, "{}");
  EXPECT_NE(p.turn.tool_calls[0].id, p.turn.tool_calls[1].id);
  expect_split_invariant(out, o, p);
}

TEST(OutputParserXml, ACallInsideReasoningEndsItAndIsACall) {
  const std::string out = "<think>\nI need the weather.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n"
                          "</parameter>\n</function>\n</tool_call>";
  const Options o = xml_options(xml_tools());
  const Parsed p = run_text(out, o);
  EXPECT_EQ(p.turn.reasoning_content, "I need the weather.");
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  EXPECT_EQ(p.turn.tool_calls[0].arguments, R"({"city":"Oslo"})");
  expect_split_invariant(out, o, p);
  // The JSON format keeps Qwen3's rule: a call inside reasoning is reasoning text.
  const Parsed j = run_text("<think>\nmaybe <tool_call>\n{\"name\": \"f\"}\n</tool_call>\n</think>\n\nno");
  EXPECT_EQ(j.turn.tool_calls.size(), 0u);
  EXPECT_EQ(j.turn.content, "no");
}

TEST(OutputParserXml, MalformedBlocksComeBackAsContent) {
  const Options o = xml_options(xml_tools());
  for (const std::string block : {"<tool_call>\n{\"name\": \"get_weather\"}\n</tool_call>",  // JSON in an XML fuel
                                  "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>",
                                  "<tool_call>\n<function=get_weather>\n</tool_call>",
                                  "<tool_call>\n<function=>\n</function>\n</tool_call>",
                                  "<tool_call>\n<function=f>\n</function>\ntrailing\n</tool_call>"}) {
    const Parsed p = run_text("Before. " + block, o);
    EXPECT_EQ(p.turn.tool_calls.size(), 0u) << block;
    EXPECT_EQ(p.turn.content, "Before. " + block);
  }
  // The stream ends inside a block.
  const Parsed cut = run_text("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", o);
  EXPECT_EQ(cut.turn.tool_calls.size(), 0u);
  EXPECT_EQ(cut.turn.content, "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar");
}

TEST(OutputParserXml, ForcedOpeningThenParallelToolCallsOff) {
  CompletionRequest r;
  r.tools = xml_tools();
  r.tool_choice = {ToolChoice::Mode::kFunction, "get_weather"};
  Options o = xml_options(r.tools);
  o.max_tool_calls = 1;
  const std::string opening = forced_opening(r, false, ToolCallFormat::kXml);
  EXPECT_EQ(opening, "<tool_call>\n<function=get_weather>\n");
  OutputParser parser(o, std::mt19937_64(1));
  parser.prime(opening);
  Parsed p;
  take(p, parser.push("<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=x>"));
  take(p, parser.finish());
  ASSERT_EQ(p.turn.tool_calls.size(), 1u);
  EXPECT_EQ(p.turn.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.turn.tool_calls[0].arguments, R"({"city":"Rome"})");
  EXPECT_TRUE(parser.complete());
  r.tool_choice = {ToolChoice::Mode::kRequired, ""};
  EXPECT_EQ(forced_opening(r, false, ToolCallFormat::kXml), "<tool_call>\n<function=");
  EXPECT_EQ(forced_opening(r, true, ToolCallFormat::kXml), "\n</think>\n\n<tool_call>\n<function=");
}

TEST(ToolCallFormat, ReadFromTheChatTemplate) {
  EXPECT_EQ(tool_call_format_of("{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"), ToolCallFormat::kXml);
  EXPECT_EQ(tool_call_format_of("{{- '<tool_call>\\n{\"name\": \"' }}"), ToolCallFormat::kJson);
  EXPECT_EQ(parse_tool_call_format("xml"), ToolCallFormat::kXml);
  EXPECT_EQ(parse_tool_call_format("json"), ToolCallFormat::kJson);
  EXPECT_FALSE(parse_tool_call_format("yaml").has_value());
  EXPECT_STREQ(tool_call_format_name(ToolCallFormat::kXml), "xml");
}

}  // namespace
}  // namespace rocket
