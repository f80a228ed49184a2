// /v1/responses: the input items become the chat messages they stand for (instructions first, calls
// joining their assistant turn, reasoning on the turn after it), errors name the Responses fields,
// and the event stream opens, fills and closes one item per kind of output, numbering every event.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "openai/responses_request.h"
#include "openai/responses_response.h"

namespace rocket {
namespace {

using Json = nlohmann::ordered_json;

TEST(ResponsesRequest, ItemsBecomeChatMessages) {
  const Json body = Json::parse(R"({"model": "m", "instructions": "Be brief.", "input": [
      {"role": "user", "content": [{"type": "input_text", "text": "Weather"}, {"type": "input_text", "text": "and time?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "short"}],
       "content": [{"type": "reasoning_text", "text": "Two calls."}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
      {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call", "call_id": "c2", "name": "get_time", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "22 C"},
      {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "14:05"}]},
      {"type": "function_call", "call_id": "c3", "name": "get_time", "arguments": "{}"}],
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
              {"type": "function", "name": "get_time", "strict": false}],
    "tool_choice": {"type": "function", "name": "get_time"}, "max_output_tokens": 9, "temperature": 0.5,
    "store": true, "include": ["reasoning.encrypted_content"]})");
  const ResponsesRequest r = parse_responses_request(body);
  const std::vector<ChatMessage>& m = r.chat.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "Be brief.");
  EXPECT_EQ(m[1].role, "user");
  EXPECT_EQ(m[1].content, "Weather\nand time?");
  EXPECT_EQ(m[2].role, "assistant");  // the message and the two calls after it: one turn
  EXPECT_EQ(m[2].content, "Checking.");
  EXPECT_EQ(m[2].reasoning_content, "Two calls.");  // content before summary
  ASSERT_EQ(m[2].tool_calls.size(), 2u);
  EXPECT_EQ(m[2].tool_calls[0].id, "c1");
  EXPECT_EQ(m[2].tool_calls[1].name, "get_time");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].tool_call_id, "c1");
  EXPECT_EQ(m[4].content, "14:05");
  EXPECT_EQ(m[5].role, "assistant");  // a call after tool outputs opens a new turn
  EXPECT_FALSE(m[5].content.has_value());
  ASSERT_EQ(m[5].tool_calls.size(), 1u);
  EXPECT_TRUE(m[5].reasoning_content.empty());
  ASSERT_EQ(r.chat.tools.size(), 2u);
  EXPECT_EQ(r.chat.tools[0].name, "get_weather");
  EXPECT_EQ(r.chat.tool_choice.mode, ToolChoice::Mode::kFunction);
  EXPECT_EQ(r.chat.max_tokens, 9);
  EXPECT_DOUBLE_EQ(r.chat.temperature, 0.5);
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  EXPECT_EQ(r.echo["tools"], body["tools"]);
  EXPECT_EQ(r.echo["max_output_tokens"], 9);

  const ResponsesRequest plain = parse_responses_request(Json::parse(R"({"model": "m", "input": "Hi"})"));
  ASSERT_EQ(plain.chat.messages.size(), 1u);
  EXPECT_EQ(plain.chat.messages[0].role, "user");
  EXPECT_EQ(plain.echo["tool_choice"], "auto");
  EXPECT_EQ(plain.echo["text"]["format"]["type"], "text");
  const ResponsesRequest json = parse_responses_request(
      Json::parse(R"({"model": "m", "input": "Hi", "text": {"format": {"type": "json_object"}}})"));
  EXPECT_EQ(json.chat.response_format.kind, ResponseFormat::Kind::kJsonObject);
}

TEST(ResponsesRequest, RefusalsNameTheResponsesField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model": "m"})", "input"},
      {R"({"model": "m", "input": 5})", "input"},
      {R"({"model": "m", "input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"model": "m", "input": "x", "background": true})", "background"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "file_search"}]})", "tools[0].type"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "function", "name": "f", "color": 1}]})", "tools[0].color"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "function", "name": 5}]})", "tools[0].name"},
      {R"({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file"}]}]})", "input[0].content[0].type"},
      {R"({"model": "m", "input": [{"role": "robot", "content": "x"}]})", "input[0].role"},
      {R"({"model": "m", "input": [{"type": "web_search_call"}]})", "input[0].type"},
      {R"({"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input[0].call_id"},
      {R"({"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[]"}]})", "input"},
      {R"({"model": "m", "input": "x", "max_output_tokens": -1})", "max_output_tokens"},
      {R"({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": 5}}})", "text.format.schema"},
      {R"({"model": "m", "input": "x", "text": {"colour": 1}})", "text.colour"},
      {R"({"model": "m", "input": "x", "text": {"verbosity": "low"}})", "text.verbosity"},
      {R"({"model": "m", "input": "x", "include": ["message.output_text.logprobs"]})", "include[0]"},
      {R"({"model": "m", "input": "x", "reasoning": {"effort": 5}})", "reasoning.effort"},
      {R"({"model": "m", "input": "x", "temperature": 3})", "temperature"},
      {R"({"model": "m", "input": "x", "n": 2})", "n"},
  };
  for (const auto& [body, param] : cases) {
    try {
      parse_responses_request(Json::parse(body));
      ADD_FAILURE() << "accepted " << body;
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), param) << body << ": " << e.message();
      if (std::string(param) != "input") EXPECT_NE(e.message().find(param), std::string::npos) << e.message();
    }
  }
}

TEST(ResponsesStream, OneItemPerKindOfOutputEveryEventNumbered) {
  ResponsesStream s("resp_x", 7, "m", Json{{"tools", Json::array()}}, std::mt19937_64(1));
  std::vector<Json> events = s.start();
  for (const OutputEvent& o : std::vector<OutputEvent>{ReasoningDelta{"Think"}, ReasoningDelta{"ing."}, ContentDelta{"Hi"},
                                                       ToolCallStart{0, "call_a", "f"}, ToolCallArgumentsDelta{0, "{}"},
                                                       ToolCallStart{1, "call_b", "g"}, ToolCallArgumentsDelta{1, "{\"x\":1}"}})
    for (Json& e : s.on(o)) events.push_back(std::move(e));
  for (Json& e : s.finish(FinishReason::kStop, Usage{.prompt_tokens = 5, .completion_tokens = 9, .cached_tokens = 2}, 3))
    events.push_back(std::move(e));
  std::vector<std::string> types;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["sequence_number"], i);
    types.push_back(events[i]["type"]);
  }
  const std::vector<std::string> want = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
      "response.output_item.done", "response.completed"};
  EXPECT_EQ(types, want);
  const Json& r = s.response();
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 4u);
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "Thinking.");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Hi");
  EXPECT_EQ(r["output"][1]["status"], "completed");
  EXPECT_EQ(r["output"][3]["call_id"], "call_b");
  EXPECT_EQ(r["output"][3]["arguments"], "{\"x\":1}");
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 3);
  EXPECT_EQ(r["usage"]["total_tokens"], 14);
  EXPECT_EQ(events.back()["response"], r);

  ResponsesStream cut("resp_y", 7, "m", Json::object(), std::mt19937_64(2));
  cut.start();
  cut.on(ContentDelta{"Hel"});
  const std::vector<Json> end = cut.finish(FinishReason::kLength, Usage{.prompt_tokens = 1, .completion_tokens = 4}, 0);
  EXPECT_EQ(end.back()["type"], "response.incomplete");
  EXPECT_EQ(cut.response()["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(cut.response()["output"][0]["status"], "incomplete");
}

}  // namespace
}  // namespace rocket
