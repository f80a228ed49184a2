// /v1/responses: the input items become the chat messages they stand for (instructions first, calls
// joining their assistant turn, reasoning on the turn after it), errors name the Responses fields,
// and the event stream opens, fills and closes one item per kind of output, numbering every event.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "openai/responses_request.h"
#include "openai/responses_response.h"
#include "openai/sealed_reasoning.h"

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
      {R"({"model": "m", "input": "x", "tools": [{"type": "custom", "name": "apply_patch"}]})", "tools[0].type"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "namespace", "name": "ns", "tools": [{"type": "custom", "name": "c"}]}]})",
       "tools[0].tools[0].type"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "namespace", "name": "ns"}]})", "tools[0].tools"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "function", "name": "f"}, {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]}]})",
       "tools[1].tools[0].name"},
      {R"({"model": "m", "input": "x", "client_metadata": {"thread_id": 5}})", "client_metadata.thread_id"},
      {R"({"model": "m", "input": "x", "reasoning": {"summary": 1}})", "reasoning.summary"},
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

// Codex 0.171's request (tests/e2e/agents.sh captures it whole), cut to its shape: developer messages,
// client_metadata, prompt_cache_key, store false, encrypted reasoning asked for, a namespace of
// functions and a hosted web_search tool.
TEST(ResponsesRequest, CodexsRequestIsTaken) {
  const Json body = Json::parse(R"({"model": "m", "stream": true,
    "input": [{"type": "message", "id": "msg_1", "role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
              {"type": "message", "id": "msg_2", "role": "user", "content": [{"type": "input_text", "text": "Read note.txt"}]}],
    "tools": [{"type": "function", "name": "exec_command", "description": "Runs a command", "strict": false,
               "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
              {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
               "tools": [{"type": "function", "name": "spawn_agent", "strict": false, "parameters": {"type": "object"}},
                         {"type": "function", "name": "close_agent", "strict": false, "parameters": {"type": "object"}}]},
              {"type": "web_search", "external_web_access": false}],
    "tool_choice": "auto", "parallel_tool_calls": true, "reasoning": {"summary": "auto"}, "store": false,
    "include": ["reasoning.encrypted_content"], "prompt_cache_key": "thread-1",
    "client_metadata": {"thread_id": "thread-1", "x-codex-turn-metadata": "{\"turn_id\":\"t\"}"}})");
  const ResponsesRequest r = parse_responses_request(body);
  std::vector<std::string> names;
  for (const Tool& t : r.chat.tools) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"exec_command", "spawn_agent", "close_agent"}));  // flattened; no web_search
  EXPECT_EQ(r.namespace_of.at("spawn_agent"), "multi_agent_v1");
  EXPECT_FALSE(r.namespace_of.contains("exec_command"));
  EXPECT_TRUE(r.encrypted_reasoning);
  ASSERT_EQ(r.echo["tools"].size(), 2u);  // what the model was offered: the hosted tool is not among them
  EXPECT_EQ(r.echo["tools"][1]["type"], "namespace");
  EXPECT_EQ(r.chat.messages[0].role, "developer");
  std::map<std::string, std::string> a(r.chat.client_attributes.begin(), r.chat.client_attributes.end());
  EXPECT_EQ(a["prompt_cache_key"], "thread-1");
  EXPECT_EQ(a["store"], "false");
  EXPECT_EQ(a["client_metadata.thread_id"], "thread-1");
  EXPECT_EQ(a["reasoning.summary"], "auto");
  EXPECT_EQ(a["hosted_tools_not_offered"], "1");

  // The next turn sends the reasoning back sealed, with the call (which names its namespace) and its output.
  Json next = body;
  next["input"].push_back({{"type", "reasoning"}, {"id", "rs_1"}, {"summary", Json::array()}, {"content", nullptr},
                           {"encrypted_content", seal_reasoning("Read it with cat.")}});
  next["input"].push_back({{"type", "function_call"}, {"id", "fc_1"}, {"call_id", "c1"}, {"name", "exec_command"},
                           {"arguments", "{\"cmd\": \"cat note.txt\"}"}, {"status", "completed"}});
  next["input"].push_back({{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "secret"}});
  next["input"].push_back({{"type", "reasoning"}, {"id", "rs_2"}, {"summary", Json::array()}, {"encrypted_content", "gAAAA-openai"}});
  const ResponsesRequest n = parse_responses_request(next);
  const std::vector<ChatMessage>& m = n.chat.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].reasoning_content, "Read it with cat.");  // rendered where the template wants reasoning
  ASSERT_EQ(m[2].tool_calls.size(), 1u);
  EXPECT_EQ(m[3].content, "secret");
}

TEST(ResponsesStream, EncryptedReasoningAndNamespacedCalls) {
  ResponsesStream s("resp_x", 7, "m", Json{{"tools", Json::array()}}, std::mt19937_64(1),
                    ResponsesStreamOptions{.encrypted_reasoning = true, .namespace_of = {{"spawn_agent", "multi_agent_v1"}}});
  s.start();
  std::vector<Json> events;
  for (const OutputEvent& o : std::vector<OutputEvent>{ReasoningDelta{"Plan."}, ToolCallStart{0, "call_a", "spawn_agent"},
                                                       ToolCallArgumentsDelta{0, "{}"}, ToolCallStart{1, "call_b", "exec_command"},
                                                       ToolCallArgumentsDelta{1, "{}"}})
    for (Json& e : s.on(o)) events.push_back(std::move(e));
  s.finish(FinishReason::kStop, Usage{.prompt_tokens = 5, .completion_tokens = 9}, 2);
  const Json& r = s.response();
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(open_reasoning(r["output"][0]["encrypted_content"].get<std::string>()), "Plan.");
  EXPECT_EQ(r["output"][1]["namespace"], "multi_agent_v1");
  EXPECT_FALSE(r["output"][2].contains("namespace"));
  bool done_carries_it = false;  // the item a stream's client keeps is output_item.done's
  for (const Json& e : events)
    if (e["type"] == "response.output_item.done" && e["item"]["type"] == "reasoning")
      done_carries_it = e["item"]["encrypted_content"] == r["output"][0]["encrypted_content"];
  EXPECT_TRUE(done_carries_it);

  ResponsesStream plain("resp_y", 7, "m", Json::object(), std::mt19937_64(2));
  plain.on(ReasoningDelta{"Plan."});
  plain.finish(FinishReason::kStop, Usage{}, 1);
  EXPECT_FALSE(plain.response()["output"][0].contains("encrypted_content"));  // not asked for
}

}  // namespace
}  // namespace rocket
