// Request parsing and validation for /v1/chat/completions and /v1/completions: a full request parses
// into CompletionRequest, and every invalid or unsupported field is a 400 whose `param` names it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "openai/openai_request.h"

namespace rocket {
namespace {

using Json = nlohmann::ordered_json;

Json parse(std::string_view text) { return Json::parse(text); }

const char* kChatBase = R"({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]})";
const char* kCompletionBase = R"({"model": "tiny", "prompt": "Once upon"})";

// `base` with the members of `overlay` replaced or added.
Json with(const char* base, std::string_view overlay) {
  Json b = parse(base);
  const Json o = parse(overlay);
  for (const auto& [key, value] : o.items()) b[key] = value;
  return b;
}

struct Expected {
  std::string overlay;  // members set on the base request
  std::string param;    // the field the 400 must name
  std::string code;
};

// parse_chat_request with the server's default image bounds.
CompletionRequest parse_chat(const nlohmann::ordered_json& body) { return parse_chat_request(body); }

template <typename Parse>
void expect_rejections(Parse parse_request, const char* base, const std::vector<Expected>& cases) {
  for (const Expected& c : cases) {
    SCOPED_TRACE(c.overlay);
    try {
      parse_request(with(base, c.overlay));
      ADD_FAILURE() << "accepted";
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), c.param) << e.message();
      EXPECT_EQ(e.code(), c.code) << e.message();
      EXPECT_EQ(e.type(), "invalid_request_error");
      // The message names the field too, for clients that only show the message.
      const std::string top = c.param.substr(0, c.param.find_first_of(".["));
      EXPECT_NE(e.message().find(top), std::string::npos) << e.message();
    }
  }
}

TEST(ChatRequest, ParsesEveryField) {
  const CompletionRequest r = parse_chat_request(parse(R"({
    "model": "tiny",
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "developer", "content": [{"type": "text", "text": "Use tools."}, {"type": "text", "text": "Metric units."}]},
      {"role": "user", "content": "Weather in 東京? 🌦️", "name": "ann"},
      {"role": "assistant", "content": null, "reasoning_content": "Need the tool.", "refusal": null,
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\":\"東京\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18°C"}
    ],
    "max_tokens": 50, "max_completion_tokens": 64, "temperature": 0.7, "top_p": 0.9, "top_k": 20, "seed": -3,
    "stop": ["END", "\n\n"], "stream": true, "stream_options": {"include_usage": true},
    "logprobs": true, "top_logprobs": 5, "n": 1, "frequency_penalty": 0, "presence_penalty": 0.0,
    "logit_bias": {}, "response_format": {"type": "text"}, "modalities": ["text"], "audio": null,
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
               "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
               "strict": true}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false,
    "user": "u-1", "store": false, "metadata": {"k": "v"}, "service_tier": "auto",
    "chat_template_kwargs": {"enable_thinking": false}
  })"));
  EXPECT_EQ(r.kind, CompletionRequest::Kind::kChat);
  EXPECT_EQ(r.model, "tiny");
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[1].role, "developer");
  EXPECT_EQ(r.messages[1].content, "Use tools.\nMetric units.");
  EXPECT_EQ(r.messages[2].content, "Weather in 東京? 🌦️");
  EXPECT_EQ(r.messages[2].name, "ann");
  EXPECT_FALSE(r.messages[3].content.has_value());
  EXPECT_EQ(r.messages[3].reasoning_content, "Need the tool.");
  ASSERT_EQ(r.messages[3].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[3].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.messages[3].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.messages[3].tool_calls[0].arguments, R"({"city":"東京"})");
  EXPECT_EQ(r.messages[4].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[4].content, "18°C");
  EXPECT_EQ(r.max_tokens, 64);  // max_completion_tokens wins
  EXPECT_DOUBLE_EQ(r.temperature, 0.7);
  EXPECT_DOUBLE_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.top_k, 20);
  EXPECT_EQ(r.seed, -3);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 5);
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].description, "Weather now");
  EXPECT_TRUE(r.tools[0].strict);
  // The schema keeps the client's key order: the chat template renders it with tojson.
  EXPECT_EQ(r.tools[0].parameters.dump(),
            R"({"type":"object","required":["city"],"properties":{"city":{"type":"string"}}})");
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kFunction);
  EXPECT_EQ(r.tool_choice.function, "get_weather");
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.user, "u-1");
  EXPECT_EQ(r.enable_thinking, false);
  // Bookkeeping changes no token: recorded for the request's span, in the order sent.
  EXPECT_EQ(r.client_attributes, (std::vector<std::pair<std::string, std::string>>{
                                     {"store", "false"}, {"metadata.k", "v"}, {"service_tier", "auto"}}));
}

TEST(ChatRequest, PromptCacheKeyAndSafetyIdentifierAreRecorded) {
  Json body = parse(kChatBase);
  body["prompt_cache_key"] = "session-7";
  body["safety_identifier"] = "hash-1";
  const CompletionRequest r = parse_chat_request(body);
  EXPECT_EQ(r.client_attributes, (std::vector<std::pair<std::string, std::string>>{
                                     {"prompt_cache_key", "session-7"}, {"safety_identifier", "hash-1"}}));
  EXPECT_FALSE(r.reasoning_effort_hint);  // chat's reasoning_effort is asked for, not hinted
  EXPECT_TRUE(parse_chat_request(parse(kChatBase)).client_attributes.empty());
}

TEST(ChatRequest, Defaults) {
  const CompletionRequest r = parse_chat_request(parse(kChatBase));
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_DOUBLE_EQ(r.temperature, 1.0);
  EXPECT_DOUBLE_EQ(r.top_p, 1.0);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kAuto);
  EXPECT_TRUE(r.parallel_tool_calls);
  EXPECT_FALSE(r.enable_thinking.has_value());
}

TEST(ChatRequest, SamplingKnobsAndChoices) {
  const CompletionRequest d = parse_chat_request(parse(kChatBase));
  EXPECT_EQ(d.n, 1);
  EXPECT_DOUBLE_EQ(d.repetition_penalty, 1.0);
  EXPECT_TRUE(d.logit_bias.empty());
  const CompletionRequest r = parse_chat_request(with(kChatBase, R"({"n": 3, "presence_penalty": 1.5,
      "frequency_penalty": -0.5, "repetition_penalty": 1.1, "min_p": 0.05,
      "logit_bias": {"9707": 100, "11": -100, "1879": 2.5}})"));
  EXPECT_EQ(r.n, 3);
  EXPECT_DOUBLE_EQ(r.presence_penalty, 1.5);
  EXPECT_DOUBLE_EQ(r.frequency_penalty, -0.5);
  EXPECT_DOUBLE_EQ(r.repetition_penalty, 1.1);
  EXPECT_DOUBLE_EQ(r.min_p, 0.05);
  // Ascending token ids, whatever order the client wrote.
  ASSERT_EQ(r.logit_bias.size(), 3u);
  EXPECT_EQ(r.logit_bias[0].token, 11);
  EXPECT_EQ(r.logit_bias[0].bias, -100.0f);
  EXPECT_EQ(r.logit_bias[1].token, 1879);
  EXPECT_EQ(r.logit_bias[1].bias, 2.5f);
  EXPECT_EQ(r.logit_bias[2].token, 9707);
  // vLLM's extensions, which SGLang's and vLLM's benchmark clients send.
  EXPECT_FALSE(d.ignore_eos);
  EXPECT_EQ(d.min_tokens, 0);
  const CompletionRequest bench = parse_chat_request(with(kChatBase, R"({"ignore_eos": true, "min_tokens": 64})"));
  EXPECT_TRUE(bench.ignore_eos);
  EXPECT_EQ(bench.min_tokens, 64);
  // 300 entries are OpenAI's limit: accepted; 301 are not.
  Json many = Json::object();
  for (int t = 0; t < kMaxLogitBias; ++t) many[std::to_string(t)] = 1;
  Json body = parse(kChatBase);
  body["logit_bias"] = many;
  EXPECT_EQ(parse_chat_request(body).logit_bias.size(), size_t(kMaxLogitBias));
  body["logit_bias"]["300"] = 1;
  EXPECT_THROW(parse_chat_request(body), ProtocolError);
}

TEST(ChatRequest, TemplateKwargsAndReasoningEffortPassThrough) {
  const CompletionRequest r = parse_chat_request(parse_json_body(R"({"model": "tiny",
      "messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "f", "arguments": ""}}]}, {"role": "user", "content": "hi"}],
      "chat_template_kwargs": {"enable_thinking": true, "preserve_thinking": true, "custom": {"a": [1]}, "gone": null},
      "reasoning_effort": "low"})"));
  EXPECT_EQ(r.enable_thinking, true);
  EXPECT_EQ(r.template_kwargs.dump(), R"({"enable_thinking":true,"preserve_thinking":true,"custom":{"a":[1]}})");
  EXPECT_EQ(r.reasoning_effort, "low");
  ASSERT_EQ(r.messages[0].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[0].tool_calls[0].arguments, "{}");  // an empty string is a call without arguments
}

TEST(ChatRequest, NullMeansNotGiven) {
  const CompletionRequest r = parse_chat_request(with(kChatBase, R"({"temperature": null, "stop": null, "seed": null,
      "max_tokens": null, "tools": null, "tool_choice": null, "n": null, "stream_options": null, "top_k": -1,
      "logit_bias": null, "response_format": null, "chat_template_kwargs": {"enable_thinking": null}})"));
  EXPECT_DOUBLE_EQ(r.temperature, 1.0);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.top_k, 0);
  EXPECT_FALSE(r.enable_thinking.has_value());
}

TEST(ChatRequest, StopAsStringAndIntegralDecimals) {
  const CompletionRequest r = parse_chat_request(with(kChatBase, R"({"stop": "。", "max_tokens": 100.0, "seed": 7})"));
  EXPECT_EQ(r.stop, std::vector<std::string>{"。"});
  EXPECT_EQ(r.max_tokens, 100);
  EXPECT_EQ(r.seed, 7);
}

TEST(ChatRequest, ResponseFormats) {
  EXPECT_EQ(parse_chat_request(with(kChatBase, R"({"response_format": {"type": "json_object"}})")).response_format.kind,
            ResponseFormat::Kind::kJsonObject);
  const CompletionRequest r = parse_chat_request(with(kChatBase, R"({"response_format": {"type": "json_schema",
      "json_schema": {"name": "city-1", "strict": true, "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}}})"));
  EXPECT_EQ(r.response_format.kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_EQ(r.response_format.name, "city-1");
  EXPECT_EQ(r.response_format.schema.dump(), R"({"type":"object","properties":{"b":{},"a":{}}})");  // key order kept
  // The schema compiles while parsing: a keyword outside the subset is named with its path.
  try {
    parse_chat_request(with(kChatBase, R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x",
        "schema": {"type": "object", "properties": {"tags": {"type": "array", "items": {"uniqueItems": true}}}}}}})"));
    FAIL() << "accepted an unsupported keyword";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.param(), "response_format.json_schema.schema");
    EXPECT_NE(e.message().find("at $.properties.tags.items.uniqueItems: keyword 'uniqueItems' is not supported"),
              std::string::npos) << e.message();
  }
}

TEST(ChatRequest, RejectionsNameTheField) {
  expect_rejections(parse_chat, kChatBase, {
      {R"({"model": 5})", "model", "invalid_type"},
      {R"({"messages": "Hi"})", "messages", "invalid_type"},
      {R"({"messages": []})", "messages", "invalid_value"},
      {R"({"messages": ["Hi"]})", "messages[0]", "invalid_type"},
      {R"({"messages": [{"content": "Hi"}]})", "messages[0].role", "missing_required_parameter"},
      {R"({"messages": [{"role": "robot", "content": "Hi"}]})", "messages[0].role", "invalid_value"},
      {R"({"messages": [{"role": "function", "content": "Hi"}]})", "messages[0].role", "invalid_value"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content", "missing_required_parameter"},
      {R"({"messages": [{"role": "user", "content": null}]})", "messages[0].content", "missing_required_parameter"},
      {R"({"messages": [{"role": "assistant"}]})", "messages[0].content", "missing_required_parameter"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content", "invalid_type"},
      {R"({"messages": [{"role": "user", "content": ["Hi"]}]})", "messages[0].content[0]", "invalid_type"},
      {R"({"messages": [{"role": "user", "content": [{"text": "Hi"}]}]})", "messages[0].content[0].type",
       "missing_required_parameter"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", "messages[0].content[0].text",
       "missing_required_parameter"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]})", "messages[0].content[0].text",
       "invalid_type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
           {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]})",
       "messages[0].content[1]", "invalid_image_url"},
      {R"({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]})",
       "messages[0].content[0].type", "unsupported_value"},
      {R"({"messages": [{"role": "user", "content": "Hi", "name": 3}]})", "messages[0].name", "invalid_type"},
      {R"({"messages": [{"role": "assistant", "tool_calls": {}}]})", "messages[0].tool_calls", "invalid_type"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f",
           "arguments": "{}"}}]}]})", "messages[0].tool_calls[0].id", "missing_required_parameter"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "function": {}}]}]})",
       "messages[0].tool_calls[0].type", "unsupported_value"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
           "function": {"name": "f"}}]}]})", "messages[0].tool_calls[0].function.arguments",
       "missing_required_parameter"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
           "function": {"name": "f", "arguments": 5}}]}]})", "messages[0].tool_calls[0].function.arguments",
       "invalid_type"},
      {R"({"messages": [{"role": "assistant", "content": "x", "reasoning_content": 1}]})",
       "messages[0].reasoning_content", "invalid_type"},
      {R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "tool", "content": "18"}]})",
       "messages[1].tool_call_id", "missing_required_parameter"},
      {R"({"temperature": "hot"})", "temperature", "invalid_type"},
      {R"({"temperature": true})", "temperature", "invalid_type"},
      {R"({"temperature": 2.5})", "temperature", "invalid_value"},
      {R"({"temperature": -0.1})", "temperature", "invalid_value"},
      {R"({"top_p": 0})", "top_p", "invalid_value"},
      {R"({"top_p": 1.01})", "top_p", "invalid_value"},
      {R"({"top_p": "all"})", "top_p", "invalid_type"},
      {R"({"top_k": -2})", "top_k", "invalid_value"},
      {R"({"top_k": 2.5})", "top_k", "invalid_type"},
      {R"({"seed": "42"})", "seed", "invalid_type"},
      {R"({"max_tokens": 0})", "max_tokens", "invalid_value"},
      {R"({"max_tokens": "10"})", "max_tokens", "invalid_type"},
      {R"({"max_completion_tokens": -1})", "max_completion_tokens", "invalid_value"},
      {R"({"stop": 5})", "stop", "invalid_type"},
      {R"({"stop": ["a", 3]})", "stop[1]", "invalid_type"},
      {R"({"stop": ["a", "b", "c", "d", "e"]})", "stop", "invalid_value"},
      {R"({"stop": ""})", "stop", "invalid_value"},
      {R"({"stream": "yes"})", "stream", "invalid_type"},
      {R"({"stream_options": {"include_usage": true}})", "stream_options", "invalid_value"},
      {R"({"stream": true, "stream_options": true})", "stream_options", "invalid_type"},
      {R"({"stream": true, "stream_options": {"include_usage": 1}})", "stream_options.include_usage", "invalid_type"},
      {R"({"stream": true, "stream_options": {"continuous_usage_stats": true}})",
       "stream_options.continuous_usage_stats", "unknown_parameter"},
      {R"({"logprobs": 1})", "logprobs", "invalid_type"},
      {R"({"logprobs": true, "top_logprobs": 21})", "top_logprobs", "invalid_value"},
      {R"({"top_logprobs": 2})", "top_logprobs", "invalid_value"},
      {R"({"n": 0})", "n", "invalid_value"},
      {R"({"n": "1"})", "n", "invalid_type"},
      {R"({"presence_penalty": 3})", "presence_penalty", "invalid_value"},
      {R"({"frequency_penalty": -2.5})", "frequency_penalty", "invalid_value"},
      {R"({"repetition_penalty": 0})", "repetition_penalty", "invalid_value"},
      {R"({"repetition_penalty": "1"})", "repetition_penalty", "invalid_type"},
      {R"({"min_p": 1.5})", "min_p", "invalid_value"},
      {R"({"ignore_eos": 1})", "ignore_eos", "invalid_type"},
      {R"({"min_tokens": -1})", "min_tokens", "invalid_value"},
      {R"({"min_tokens": "8"})", "min_tokens", "invalid_type"},
      {R"({"logit_bias": [1]})", "logit_bias", "invalid_type"},
      {R"({"logit_bias": {"1000": 101}})", "logit_bias.1000", "invalid_value"},
      {R"({"logit_bias": {"1000": "5"}})", "logit_bias.1000", "invalid_type"},
      {R"({"logit_bias": {"-1": 5}})", "logit_bias.-1", "invalid_value"},
      {R"({"logit_bias": {"hello": 5}})", "logit_bias.hello", "invalid_value"},
      {R"({"logit_bias": {"7": 1, "07": 2}})", "logit_bias", "invalid_value"},
      {R"({"response_format": {"type": "json"}})", "response_format.type", "invalid_value"},
      {R"({"response_format": {"type": "json_schema"}})", "response_format.json_schema", "missing_required_parameter"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {}}})", "response_format.json_schema.name",
       "missing_required_parameter"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}}})",
       "response_format.json_schema.name", "invalid_value"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object",
          "properties": {"n": {"type": "integer", "multipleOf": 2}}}}}})", "response_format.json_schema.schema",
       "unsupported_value"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 1}}})",
       "response_format.json_schema.schema", "invalid_type"},
      {R"({"response_format": {"type": "json_object", "schema": {}}})", "response_format.schema", "unknown_parameter"},
      {R"({"response_format": {"type": "json_object"}, "tools": [{"type": "function", "function": {"name": "f"}}],
          "tool_choice": "required"})", "response_format", "unsupported_value"},
      {R"({"response_format": "json"})", "response_format", "invalid_type"},
      {R"({"modalities": ["text", "audio"]})", "modalities", "unsupported_value"},
      {R"({"audio": {"voice": "alloy", "format": "wav"}})", "audio", "unsupported_parameter"},
      {R"({"prediction": {"type": "content", "content": "x"}})", "prediction", "unsupported_parameter"},
      {R"({"reasoning_effort": "extreme"})", "reasoning_effort", "invalid_value"},
      {R"({"reasoning_effort": 3})", "reasoning_effort", "invalid_type"},
      {R"({"chat_template_kwargs": {"messages": []}})", "chat_template_kwargs.messages", "unsupported_parameter"},
      {R"({"chat_template_kwargs": {"reasoning_effort": "low"}})", "chat_template_kwargs.reasoning_effort",
       "unsupported_parameter"},
      {R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
          "function": {"name": "f", "arguments": "[1, 2]"}}]}]})", "messages[0].tool_calls[0].function.arguments",
       "invalid_value"},
      {R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
          "function": {"name": "f", "arguments": "{\"city\": "}}]}]})", "messages[0].tool_calls[0].function.arguments",
       "invalid_value"},
      {R"({"web_search_options": {}})", "web_search_options", "unsupported_parameter"},
      {R"({"functions": [{"name": "f"}]})", "functions", "unsupported_parameter"},
      {R"({"function_call": "auto"})", "function_call", "unsupported_parameter"},
      {R"({"best_of": 2})", "best_of", "unknown_parameter"},
      {R"({"tools": {}})", "tools", "invalid_type"},
      {R"({"tools": ["f"]})", "tools[0]", "invalid_type"},
      {R"({"tools": [{"type": "custom", "custom": {"name": "f"}}]})", "tools[0].type", "unsupported_value"},
      {R"({"tools": [{"type": "function"}]})", "tools[0].function", "missing_required_parameter"},
      {R"({"tools": [{"type": "function", "function": {"description": "d"}}]})", "tools[0].function.name",
       "missing_required_parameter"},
      {R"({"tools": [{"type": "function", "function": {"name": "get weather"}}]})", "tools[0].function.name",
       "invalid_value"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "description": 1}}]})",
       "tools[0].function.description", "invalid_type"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": "{}"}}]})",
       "tools[0].function.parameters", "invalid_type"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "strict": "yes"}}]})",
       "tools[0].function.strict", "invalid_type"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}},
                     {"type": "function", "function": {"name": "f"}}]})", "tools[1].function.name", "invalid_value"},
      {R"({"tool_choice": "sometimes"})", "tool_choice", "invalid_value"},
      {R"({"tool_choice": 1})", "tool_choice", "invalid_type"},
      {R"({"tool_choice": "required"})", "tool_choice", "invalid_value"},
      {R"({"tool_choice": {"type": "function", "function": {"name": "f"}}})", "tool_choice.function.name",
       "invalid_value"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}],
           "tool_choice": {"type": "function", "function": {"name": "g"}}})", "tool_choice.function.name",
       "invalid_value"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}],
           "tool_choice": {"type": "allowed_tools", "allowed_tools": {}}})", "tool_choice.type", "unsupported_value"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function"}})",
       "tool_choice.function", "missing_required_parameter"},
      {R"({"parallel_tool_calls": "no"})", "parallel_tool_calls", "invalid_type"},
      {R"({"user": 5})", "user", "invalid_type"},
      {R"({"store": "yes"})", "store", "invalid_type"},
      {R"({"metadata": {"k": 1}})", "metadata.k", "invalid_type"},
      {R"({"chat_template_kwargs": []})", "chat_template_kwargs", "invalid_type"},
      {R"({"chat_template_kwargs": {"enable_thinking": "no"}})", "chat_template_kwargs.enable_thinking", "invalid_type"},
      {R"({"chat_template_kwargs": {"add_generation_prompt": false}})", "chat_template_kwargs.add_generation_prompt",
       "unsupported_parameter"},
      {R"({"frobnicate": 1})", "frobnicate", "unknown_parameter"},
  });
}

TEST(ChatRequest, MissingRequiredFields) {
  expect_rejections(parse_chat, R"({"messages": [{"role": "user", "content": "Hi"}]})",
                    {{"{}", "model", "missing_required_parameter"}});
  expect_rejections(parse_chat, R"({"model": "tiny"})", {{"{}", "messages", "missing_required_parameter"}});
}

TEST(ChatRequest, UnsupportedContentPartIsNamedInTheMessage) {
  try {
    parse_chat_request(with(kChatBase, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"));
    FAIL() << "accepted";
  } catch (const ProtocolError& e) {
    EXPECT_NE(e.message().find("image_url"), std::string::npos) << e.message();
  }
}

TEST(CompletionRequest, ParsesPromptForms) {
  const CompletionRequest text = parse_completion_request(parse(kCompletionBase));
  EXPECT_EQ(text.kind, CompletionRequest::Kind::kCompletion);
  EXPECT_EQ(std::get<std::string>(text.prompt), "Once upon");
  EXPECT_EQ(text.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_FALSE(text.logprobs);

  const CompletionRequest one = parse_completion_request(with(kCompletionBase, R"({"prompt": ["Hello 世界"]})"));
  EXPECT_EQ(std::get<std::string>(one.prompt), "Hello 世界");
  const CompletionRequest ids = parse_completion_request(with(kCompletionBase, R"({"prompt": [9707, 11, 1879]})"));
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids.prompt), (std::vector<int32_t>{9707, 11, 1879}));
  const CompletionRequest nested = parse_completion_request(with(kCompletionBase, R"({"prompt": [[1, 2]]})"));
  EXPECT_EQ(std::get<std::vector<int32_t>>(nested.prompt), (std::vector<int32_t>{1, 2}));

  const CompletionRequest r = parse_completion_request(with(kCompletionBase, R"({"max_tokens": 5, "logprobs": 3,
      "echo": false, "best_of": 1, "suffix": null, "n": 1, "stop": ["\n"], "seed": 1, "stream": true,
      "stream_options": {"include_usage": false}, "user": "u", "ignore_eos": true, "min_tokens": 2})"));
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(r.min_tokens, 2);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.include_usage);
}

TEST(CompletionRequest, RejectionsNameTheField) {
  expect_rejections(parse_completion_request, kCompletionBase, {
      {R"({"prompt": 5})", "prompt", "invalid_type"},
      {R"({"prompt": ""})", "prompt", "invalid_value"},
      {R"({"prompt": []})", "prompt", "invalid_value"},
      {R"({"prompt": ["a", "b"]})", "prompt", "unsupported_value"},
      {R"({"prompt": [[1], [2]]})", "prompt", "unsupported_value"},
      {R"({"prompt": [1, -1]})", "prompt[1]", "invalid_value"},
      {R"({"prompt": [1, "a"]})", "prompt[1]", "invalid_type"},
      {R"({"prompt": [[1, 2.5]]})", "prompt[0][1]", "invalid_type"},
      {R"({"max_tokens": 0})", "max_tokens", "invalid_value"},
      {R"({"logprobs": 6})", "logprobs", "invalid_value"},
      {R"({"logprobs": true})", "logprobs", "invalid_type"},
      {R"({"best_of": 3})", "best_of", "unsupported_value"},
      {R"({"echo": true})", "echo", "unsupported_value"},
      {R"({"suffix": "end"})", "suffix", "unsupported_value"},
      {R"({"n": -4})", "n", "invalid_value"},
      {R"({"presence_penalty": 2.2})", "presence_penalty", "invalid_value"},
      {R"({"messages": []})", "messages", "unknown_parameter"},
      {R"({"tools": []})", "tools", "unknown_parameter"},
      {R"({"temperature": 3})", "temperature", "invalid_value"},
  });
  expect_rejections(parse_completion_request, R"({"model": "tiny"})", {{"{}", "prompt", "missing_required_parameter"}});
}

TEST(RequestBody, MalformedJsonAndNonObjects) {
  try {
    parse_json_body(R"({"model": "tiny",)");
    FAIL() << "accepted";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "invalid_json");
  }
  try {
    parse_json_body("[1, 2]");
    FAIL() << "accepted";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "invalid_type");
  }
  EXPECT_EQ(parse_json_body(kChatBase)["model"], "tiny");
}

// `levels` nested containers, objects and arrays alternating, inside the request's "metadata".
std::string nested_body(int levels) {
  std::string open, close;
  for (int i = 0; i < levels; ++i) {
    open += i % 2 ? "[" : "{\"a\":";
    close += i % 2 ? ']' : '}';
  }
  return R"({"model": "tiny", "metadata": )" + open + "1" + std::string(close.rbegin(), close.rend()) + "}";
}

TEST(RequestBody, NestingIsBoundedWhileParsing) {
  // The body itself is one level: `levels` inside it make levels + 1.
  EXPECT_NO_THROW(parse_json_body(nested_body(kDefaultMaxJsonDepth - 1)));
  for (int levels : {kDefaultMaxJsonDepth, 20000, 1000000}) {
    try {
      parse_json_body(nested_body(levels));
      FAIL() << levels << " levels accepted";
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.code(), "json_too_deep");
      EXPECT_NE(e.message().find(std::to_string(kDefaultMaxJsonDepth)), std::string::npos) << e.message();
    }
  }
  EXPECT_NO_THROW(parse_json_body(nested_body(9), 10));
  EXPECT_THROW(parse_json_body(nested_body(10), 10), ProtocolError);
  // A flat body is one level.
  EXPECT_NO_THROW(parse_json_body(R"({"model": "tiny", "n": 1})", 1));
}

TEST(ErrorBody, OpenAIShape) {
  const ProtocolError e(400, "Invalid type for 'temperature'.", "temperature", "invalid_request_error", "invalid_type");
  EXPECT_EQ(error_body(e).dump(),
            R"({"error":{"message":"Invalid type for 'temperature'.","type":"invalid_request_error",)"
            R"("param":"temperature","code":"invalid_type"}})");
  const ProtocolError busy(503, "The engine queue is full.", "", "server_error");
  EXPECT_EQ(error_body(busy).dump(),
            R"({"error":{"message":"The engine queue is full.","type":"server_error","param":null,"code":null}})");
}

}  // namespace
}  // namespace rocket
