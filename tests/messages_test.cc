// /v1/messages: Anthropic's messages become the chat messages they stand for (system first, tool
// results as tool messages ahead of the user's text, one assistant turn of thinking, text and
// tool_use), errors name Anthropic's fields, and the event stream opens and closes one content block
// per kind of output, with the stop reason and Anthropic's split of cached input tokens. What Claude
// Code sends by default is taken: thinking with its budget and display, output_config, deferred tools
// and tool references, mid-conversation system messages, cache_control, context editing (applied as
// Anthropic documents it), signed thinking coming back.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "anthropic/messages_request.h"
#include "anthropic/messages_response.h"
#include "openai/sealed_reasoning.h"

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
      "thinking": {"type": "enabled", "budget_tokens": 32}, "metadata": {"user_id": "u"}, "temperature": 0.5})")).chat;
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
                .chat.messages.size(), 1u);
}

TEST(MessagesRequest, RefusalsNameAnthropicsFields) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model": "m", "messages": []})", "max_tokens"},
      {R"({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})",
       "messages[0].content[0].source.type"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "forever"}}]}]})",
       "messages[0].content[0].cache_control.type"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "memory_20250818", "name": "memory"}]})", "tools[0].type"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f", "defer_loading": 1}]})", "tools[0].defer_loading"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "sometimes"}})", "thinking.type"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "enabled", "display": "full"}})", "thinking.display"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "output_config": {"effort": "extreme"}})", "output_config.effort"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "output_config": {"format": {"type": "xml"}}})", "output_config.format.type"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "output_config": {"format": {"type": "json_schema", "schema": 5}}})", "output_config.format.schema"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "context_management": {"edits": [{"type": "compact_20260112"}]}})",
       "context_management.edits[0].type"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "tool_uses", "value": 1}}]}})",
       "context_management.edits[0].keep.type"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "context_management": {"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 0}}]}})",
       "context_management.edits[0].keep.value"},
      {R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "container": "c1"})", "container"},
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
      "message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start",
      "content_block_delta", "content_block_delta", "content_block_stop", "content_block_start", "content_block_delta",
      "content_block_stop", "message_delta", "message_stop"};
  EXPECT_EQ(types, want);
  EXPECT_EQ(events[0]["message"]["usage"]["input_tokens"], 10);
  const Json& m = s.message();
  EXPECT_EQ(m["content"][0]["thinking"], "Hm");
  EXPECT_EQ(events[3]["delta"]["type"], "signature_delta");  // a thinking block ends with its signature
  EXPECT_EQ(open_reasoning(m["content"][0]["signature"].get<std::string>()), "Hm");
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

// Claude Code 2.1's first request (tests/e2e/agents.sh captures it whole), cut to its shape.
TEST(MessagesRequest, ClaudeCodesRequestIsTaken) {
  const MessagesRequest r = parse_messages_request(Json::parse(R"({"model": "claude-sonnet-4-5",
      "messages": [
        {"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                                     {"type": "text", "text": "Read note.txt", "cache_control": {"type": "ephemeral"}}]},
        {"role": "system", "content": [{"type": "text", "text": "Environment: linux", "cache_control": {"type": "ephemeral"}}]}],
      "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1"},
                 {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
      "tools": [{"name": "Read", "description": "Reads a file", "input_schema": {"type": "object"}},
                {"name": "ToolSearch", "description": "Finds deferred tools", "input_schema": {"type": "object"}},
                {"name": "DeferredToolPlaceholder", "description": "never call", "input_schema": {"type": "object"}, "defer_loading": true}],
      "metadata": {"user_id": "{\"device_id\":\"d\",\"session_id\":\"s\"}"}, "max_tokens": 32000,
      "thinking": {"budget_tokens": 31999, "type": "enabled", "display": "omitted"},
      "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
      "output_config": {"effort": "high"}, "stream": true})"));
  const std::vector<ChatMessage>& m = r.chat.messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].content, "x-anthropic-billing-header: cc_version=2.1\nYou are an agent.");
  EXPECT_EQ(m[1].content, "<system-reminder>ctx</system-reminder>\nRead note.txt");
  EXPECT_EQ(m[2].role, "system");  // mid-conversation, where Claude Code put it
  EXPECT_EQ(m[2].content, "Environment: linux");
  ASSERT_EQ(r.chat.tools.size(), 2u);  // the deferred tool is not offered until a tool_reference loads it
  EXPECT_EQ(r.chat.tools[1].name, "ToolSearch");
  EXPECT_EQ(r.chat.enable_thinking, true);
  EXPECT_EQ(r.chat.reasoning_budget, 31999);  // enforced: the reasoning is closed once it is spent
  EXPECT_EQ(r.chat.reasoning_effort, "high");
  EXPECT_TRUE(r.chat.reasoning_effort_hint);  // a template without reasoning_effort renders without it
  EXPECT_TRUE(r.omit_thinking);
  EXPECT_TRUE(r.context_management);
  ASSERT_EQ(r.edits.size(), 1u);
  ASSERT_TRUE(r.edits[0].thinking);
  EXPECT_FALSE(r.edits[0].thinking->keep_turns);  // "all"
  EXPECT_EQ(r.chat.user, "{\"device_id\":\"d\",\"session_id\":\"s\"}");
  const auto& a = r.chat.client_attributes;
  auto attribute = [&](const std::string& key) {
    for (const auto& [k, v] : a)
      if (k == key) return v;
    return std::string("(absent)");
  };
  EXPECT_EQ(attribute("metadata.user_id"), "{\"device_id\":\"d\",\"session_id\":\"s\"}");
  EXPECT_EQ(attribute("thinking.budget_tokens"), "31999");
  EXPECT_EQ(attribute("cache_control"), "3");

  // adaptive thinking is the template's default; disabled turns it off.
  const auto thinking = [](const char* t) {
    return parse_messages_request(Json::parse(fmt::format(
        R"({{"model": "m", "max_tokens": 8, "messages": [{{"role": "user", "content": "x"}}], "thinking": {{"type": "{}"}}}})", t)))
        .chat.enable_thinking;
  };
  EXPECT_EQ(thinking("adaptive"), std::nullopt);
  EXPECT_EQ(thinking("disabled"), false);
}

TEST(MessagesRequest, ToolReferencesOfferDeferredTools) {
  const MessagesRequest r = parse_messages_request(Json::parse(R"({"model": "m", "max_tokens": 8,
      "messages": [
        {"role": "user", "content": "Fetch it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {"query": "select:WebFetch"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "tool_reference", "tool_name": "WebFetch"}]}]}],
      "tools": [{"name": "ToolSearch", "input_schema": {"type": "object"}},
                {"name": "WebFetch", "input_schema": {"type": "object"}, "defer_loading": true},
                {"name": "Monitor", "input_schema": {"type": "object"}, "defer_loading": true}]})"));
  ASSERT_EQ(r.chat.tools.size(), 2u);
  EXPECT_EQ(r.chat.tools[1].name, "WebFetch");
  EXPECT_EQ(r.chat.messages[2].content, "Tool 'WebFetch' is now available.");
}

TEST(MessagesRequest, SignedThinkingOpensAndServerToolsAreNotOffered) {
  const Json body = {{"model", "m"}, {"max_tokens", 8},
                     {"messages", Json::array({
                         Json{{"role", "user"}, {"content", "Hi"}},
                         Json{{"role", "assistant"}, {"content", Json::array({
                             Json{{"type", "thinking"}, {"thinking", ""}, {"signature", seal_reasoning("Say hi back.")}},
                             Json{{"type", "text"}, {"text", "Hi!"}}})}},
                         Json{{"role", "user"}, {"content", "Again"}},
                         Json{{"role", "assistant"}, {"content", Json::array({
                             Json{{"type", "thinking"}, {"thinking", "Theirs."}, {"signature", "EqQBCkYIBxgCKkD"}}})}}})},
                     {"tools", Json::array({Json{{"type", "web_search_20250305"}, {"name", "web_search"}, {"max_uses", 5}},
                                            Json{{"name", "f"}, {"input_schema", {{"type", "object"}}}}})}};
  const MessagesRequest r = parse_messages_request(body);
  EXPECT_EQ(r.chat.messages[1].reasoning_content, "Say hi back.");  // ours: the signature holds the reasoning
  EXPECT_EQ(r.chat.messages[3].reasoning_content, "Theirs.");       // another provider's: the text
  ASSERT_EQ(r.chat.tools.size(), 1u);
  EXPECT_EQ(r.chat.tools[0].name, "f");
  EXPECT_EQ(r.server_tools, std::vector<std::string>{"web_search_20250305"});
}

// Context editing on a conversation of three tool uses, prompts measured in characters (any monotone
// measure will do: the server's is the engine's token count).
TEST(MessagesRequest, ContextEditsClearAsDocumented) {
  const auto body = [](const std::string& edits) {
    return Json::parse(R"({"model": "m", "max_tokens": 8, "messages": [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "first thought"},
                                          {"type": "tool_use", "id": "a", "name": "grep", "input": {"q": "alpha"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "second thought"},
                                          {"type": "tool_use", "id": "b", "name": "read", "input": {"path": "beta"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "third thought"},
                                          {"type": "tool_use", "id": "c", "name": "grep", "input": {"q": "gamma"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC"}]}],
      "context_management": {"edits": )" + edits + "}}");
  };
  int counted = 0;
  const auto chars = [&counted](const CompletionRequest& c) {
    ++counted;
    int64_t n = 0;
    for (const ChatMessage& m : c.messages) {
      n += int64_t(m.content.value_or("").size() + m.reasoning_content.size());
      for (const ToolCall& call : m.tool_calls) n += int64_t(call.arguments.size());
    }
    return n;
  };
  // Thinking: all but the last turn's reasoning goes; keep "all" changes nothing and measures nothing.
  MessagesRequest t = parse_messages_request(body(R"([{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}])"));
  Json applied = apply_context_edits(t, chars);
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0]["type"], "clear_thinking_20251015");
  EXPECT_EQ(applied[0]["cleared_thinking_turns"], 2);
  EXPECT_EQ(applied[0]["cleared_input_tokens"], 13 + 14);
  EXPECT_TRUE(t.chat.messages[1].reasoning_content.empty());
  EXPECT_EQ(t.chat.messages[5].reasoning_content, "third thought");
  counted = 0;
  MessagesRequest all = parse_messages_request(body(R"([{"type": "clear_thinking_20251015", "keep": "all"}])"));
  EXPECT_TRUE(apply_context_edits(all, chars).empty());
  EXPECT_EQ(counted, 0);

  // Tool uses past the trigger: the oldest results (not of excluded tools) become the placeholder,
  // their inputs too where asked; the last `keep` stay.
  MessagesRequest u = parse_messages_request(body(R"([{"type": "clear_tool_uses_20250919",
      "trigger": {"type": "input_tokens", "value": 50}, "keep": {"type": "tool_uses", "value": 1},
      "clear_tool_inputs": ["grep"], "exclude_tools": ["read"]}])"));
  applied = apply_context_edits(u, chars);
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0]["type"], "clear_tool_uses_20250919");
  EXPECT_EQ(applied[0]["cleared_tool_uses"], 1);  // a (grep); b is excluded, c kept
  const std::vector<ChatMessage>& m = u.chat.messages;
  EXPECT_EQ(m[2].content, kClearedToolResult);
  EXPECT_EQ(m[1].tool_calls[0].arguments, "{}");
  EXPECT_EQ(m[4].content, "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB");
  EXPECT_EQ(m[6].content, "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC");
  EXPECT_EQ(applied[0]["cleared_input_tokens"], int64_t(60 + std::string(R"({"q":"alpha"})").size()) -
                                                    int64_t(std::string(kClearedToolResult).size() + 2));

  // Not triggered (the prompt is under the threshold; two tool uses are not past three), or clearing too
  // little to be worth it: the prompt stays as sent.
  for (const char* edits : {R"([{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 100000}}])",
                            R"([{"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 3}}])",
                            R"([{"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 1},
                                 "keep": {"type": "tool_uses", "value": 1}, "clear_at_least": {"type": "input_tokens", "value": 1000}}])"}) {
    MessagesRequest n = parse_messages_request(body(edits));
    const CompletionRequest before = n.chat;
    EXPECT_TRUE(apply_context_edits(n, chars).empty()) << edits;
    for (size_t i = 0; i < before.messages.size(); ++i) EXPECT_EQ(n.chat.messages[i].content, before.messages[i].content) << edits;
  }
}

TEST(MessagesStream, OmittedThinkingCacheWritesAndAppliedEdits) {
  MessagesStream s("msg_x", "m", 300,
                   MessagesStreamOptions{.omit_thinking = true, .page_tokens = 64,
                                         .applied_edits = Json::array({Json{{"type", "clear_thinking_20251015"}}}),
                                         .server_tools = true});
  std::vector<Json> events = s.start();
  EXPECT_EQ(events[0]["message"]["context_management"]["applied_edits"][0]["type"], "clear_thinking_20251015");
  for (const OutputEvent& o : std::vector<OutputEvent>{ReasoningDelta{"Secret "}, ReasoningDelta{"plan."}, ContentDelta{"Done."}})
    for (Json& e : s.on(o)) events.push_back(std::move(e));
  for (Json& e : s.finish(FinishReason::kStop, "", false, Usage{.prompt_tokens = 300, .completion_tokens = 5, .cached_tokens = 128}))
    events.push_back(std::move(e));
  for (const Json& e : events)
    EXPECT_FALSE(e.contains("delta") && e["delta"].value("type", "") == "thinking_delta") << "omitted thinking streamed: " << e;
  const Json& m = s.message();
  EXPECT_EQ(m["content"][0]["thinking"], "");
  EXPECT_EQ(open_reasoning(m["content"][0]["signature"].get<std::string>()), "Secret plan.");
  // 300 prompt tokens: 128 read from the cache, 256 - 128 written (its whole 64-token pages), 44 neither.
  EXPECT_EQ(m["usage"]["cache_read_input_tokens"], 128);
  EXPECT_EQ(m["usage"]["cache_creation_input_tokens"], 128);
  EXPECT_EQ(m["usage"]["input_tokens"], 44);
  EXPECT_EQ(m["usage"]["server_tool_use"]["web_search_requests"], 0);
  const Json& delta = events[events.size() - 2];
  EXPECT_EQ(delta["type"], "message_delta");
  EXPECT_EQ(delta["usage"], m["usage"]);
  EXPECT_EQ(delta["context_management"], m["context_management"]);
}

TEST(SealedReasoning, RoundTripsAndRefusesForeignValues) {
  for (const std::string text : {"", "a", "ab", "abc", "abcd", "Two plus two is four.\n\xe2\x9c\x93"})
    EXPECT_EQ(open_reasoning(seal_reasoning(text)), text);
  EXPECT_EQ(open_reasoning("gAAAAABo-openai-encrypted"), std::nullopt);
  EXPECT_EQ(open_reasoning("rocket.r1.abc"), std::nullopt);    // not whole quads
  EXPECT_EQ(open_reasoning("rocket.r1.ab=c"), std::nullopt);   // padding inside
  EXPECT_EQ(open_reasoning("rocket.r1.a!cd"), std::nullopt);   // outside the alphabet
}

}  // namespace
}  // namespace rocket
