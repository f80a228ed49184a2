// /v1/messages: Anthropic's messages become the chat messages they stand for (system first, tool
// results as tool messages ahead of the user's text, one assistant turn of thinking, text and
// tool_use), errors name Anthropic's fields, and the event stream opens and closes one content block
// per kind of output, with the stop reason and Anthropic's split of cached input tokens.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "anthropic/messages_request.h"
#include "anthropic/messages_response.h"

namespace rocket {
namespace {

using Json = nlohmann::ordered_json;

TEST(MessagesRequest, MessagesBecomeChatMessages) {
  const CompletionRequest r = parse_messages_request(Json::parse(R"({"model": "m", "max_tokens": 64,
      "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
      "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "Call it.", "signature": "x"},
                                          {"type": "text", "text": "Checking."},
                                          {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "22 C"}]},
                                     {"type": "text", "text": "Thanks."}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "rain", "is_error": false}]}],
      "tools": [{"name": "get_weather", "description": "d", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
      "tool_choice": {"type": "any", "disable_parallel_tool_use": true}, "stop_sequences": ["END"],
      "thinking": {"type": "enabled", "budget_tokens": 32}, "metadata": {"user_id": "u"}, "temperature": 0.5})"));
  const std::vector<ChatMessage>& m = r.messages;
  ASSERT_EQ(m.size(), 7u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "Be brief.");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Checking.");
  EXPECT_EQ(m[2].reasoning_content, "Call it.");
  ASSERT_EQ(m[2].tool_calls.size(), 1u);
  EXPECT_EQ(m[2].tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].content, "22 C");
  EXPECT_EQ(m[4].role, "user");
  EXPECT_EQ(m[4].content, "Thanks.");
  EXPECT_FALSE(m[5].content.has_value());  // a turn of tool calls alone
  EXPECT_EQ(m[6].role, "tool");             // and tool results alone: no empty user message after them
  EXPECT_EQ(r.max_tokens, 64);
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kRequired);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.enable_thinking, true);
  EXPECT_EQ(r.user, "u");
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0].parameters, Json::parse(R"({"type": "object"})"));
  // count_tokens has no max_tokens.
  EXPECT_EQ(parse_messages_request(Json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})"), true)
                .messages.size(), 1u);
}

TEST(MessagesRequest, RefusalsNameAnthropicsFields) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model": "m", "messages": []})", "max_tokens"},
      {R"({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "system", "content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "document"}]}]})",
       "messages[0].content[0].type"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": 5}]}]})",
       "messages[0].content[0].input"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "bash_20250124", "name": "bash"}]})", "tools[0].type"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f", "input_schema": 5}]})", "tools[0].input_schema"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "tool", "name": "nope"}})", "tool_choice.name"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "stop_sequences": ["a", "b", "c", "d", "e"]})", "stop_sequences"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "enabled", "budget_tokens": 4}})", "thinking.budget_tokens"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "mcp_servers": [{}]})", "mcp_servers"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "temperature": 3})", "temperature"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "n": 2})", "n"},
  };
  for (const auto& [body, param] : cases) {
    try {
      parse_messages_request(Json::parse(body));
      ADD_FAILURE() << "accepted " << body;
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), param) << body << ": " << e.message();
      EXPECT_NE(e.message().find(param), std::string::npos) << e.message();
      EXPECT_EQ(messages_error_body(e)["error"]["type"], "invalid_request_error");
    }
  }
  EXPECT_EQ(messages_error_body(ProtocolError(503, "busy"))["error"]["type"], "overloaded_error");
}

TEST(MessagesStream, BlocksStopReasonsAndCachedTokens) {
  MessagesStream s("msg_x", "m", 10);
  std::vector<Json> events = s.start();
  for (const OutputEvent& o : std::vector<OutputEvent>{ReasoningDelta{"Hm"}, ContentDelta{"Hi"}, ContentDelta{"!"},
                                                       ToolCallStart{0, "call_a", "f"}, ToolCallArgumentsDelta{0, "{\"x\":1}"}})
    for (Json& e : s.on(o)) events.push_back(std::move(e));
  for (Json& e : s.finish(FinishReason::kStop, "", true, Usage{.prompt_tokens = 10, .completion_tokens = 7, .cached_tokens = 4}))
    events.push_back(std::move(e));
  std::vector<std::string> types;
  for (const Json& e : events) types.push_back(e["type"]);
  const std::vector<std::string> want = {
      "message_start", "content_block_start", "content_block_delta", "content_block_stop", "content_block_start",
      "content_block_delta", "content_block_delta", "content_block_stop", "content_block_start", "content_block_delta",
      "content_block_stop", "message_delta", "message_stop"};
  EXPECT_EQ(types, want);
  EXPECT_EQ(events[0]["message"]["usage"]["input_tokens"], 10);
  const Json& m = s.message();
  EXPECT_EQ(m["content"][0]["thinking"], "Hm");
  EXPECT_EQ(m["content"][1]["text"], "Hi!");
  EXPECT_EQ(m["content"][2]["input"], Json::parse(R"({"x": 1})"));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["usage"]["input_tokens"], 6);
  EXPECT_EQ(m["usage"]["cache_read_input_tokens"], 4);

  MessagesStream stop("msg_y", "m", 1);
  stop.on(ContentDelta{"a"});
  stop.finish(FinishReason::kStop, "END", false, Usage{});
  EXPECT_EQ(stop.message()["stop_reason"], "stop_sequence");
  EXPECT_EQ(stop.message()["stop_sequence"], "END");
  MessagesStream cut("msg_z", "m", 1);
  cut.finish(FinishReason::kLength, "", false, Usage{});
  EXPECT_EQ(cut.message()["stop_reason"], "max_tokens");
  EXPECT_EQ(cut.message()["stop_sequence"], nullptr);
}

}  // namespace
}  // namespace rocket
