#include "anthropic/messages_request.h"

#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "openai/json_fields.h"

namespace rocket {

using Json = nlohmann::ordered_json;
using namespace json_fields;

namespace {

// The text of a string or of text blocks (other block kinds are the caller's to refuse first).
std::string text_of(const Json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  std::string text;
  for (size_t i = 0; i < as_array(v, param).size(); ++i) {
    const std::string p = path(param, i);
    const std::string type = string_at(as_object(v[i], p), "type", path(p, "type"));
    if (type != "text")
      reject(path(p, "type"), kUnsupportedValue,
             fmt::format("Unsupported value for '{}': '{}' blocks are not supported here; this engine reads text only.",
                         path(p, "type"), type));
    if (i > 0) text += '\n';
    text += string_at(v[i], "text", path(p, "text"));
  }
  return text;
}

[[noreturn]] void unsupported_block(const std::string& param, const std::string& type) {
  reject(param, kUnsupportedValue,
         fmt::format("Unsupported value for '{}': '{}' blocks are not supported; this engine reads text and runs "
                     "client tools only.", param, type));
}

// One Anthropic message as chat messages: a user turn's tool results become tool messages ahead of
// its text; an assistant turn stays one message.
void add_message(const Json& m, const std::string& p, Json& messages) {
  as_object(m, p);
  const std::string role = string_at(m, "role", path(p, "role"));
  if (role != "user" && role != "assistant")
    reject(path(p, "role"), kInvalidValue,
           fmt::format("Invalid value for '{}': '{}' is not one of user, assistant.", path(p, "role"), role));
  const Json& content = required(m, "content", path(p, "content"));
  if (content.is_string()) {
    messages.push_back({{"role", role}, {"content", content}});
    return;
  }
  const std::string cp = path(p, "content");
  std::string text, reasoning;
  Json calls = Json::array();
  for (size_t i = 0; i < as_array(content, cp).size(); ++i) {
    const std::string bp = path(cp, i);
    const Json& block = as_object(content[i], bp);
    const std::string type = string_at(block, "type", path(bp, "type"));
    if (type == "text") {
      if (!text.empty()) text += '\n';
      text += string_at(block, "text", path(bp, "text"));
    } else if (role == "user" && type == "tool_result") {
      const Json* result = member(block, "content");
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_at(block, "tool_use_id", path(bp, "tool_use_id"))},
                          {"content", result ? text_of(*result, path(bp, "content")) : std::string()}});
    } else if (role == "assistant" && type == "tool_use") {
      const Json& input = as_object(required(block, "input", path(bp, "input")), path(bp, "input"));
      calls.push_back({{"id", string_at(block, "id", path(bp, "id"))},
                       {"type", "function"},
                       {"function", {{"name", string_at(block, "name", path(bp, "name"))}, {"arguments", input.dump()}}}});
    } else if (role == "assistant" && type == "thinking") {
      if (!reasoning.empty()) reasoning += '\n';
      reasoning += string_at(block, "thinking", path(bp, "thinking"));
    } else if (role == "assistant" && type == "redacted_thinking") {
      // Another provider's encrypted reasoning: nothing this model can read.
    } else {
      unsupported_block(path(bp, "type"), type);
    }
  }
  if (role == "user") {
    // A turn of tool results alone needs no user message after them.
    if (!text.empty() || messages.empty() || messages.back()["role"] != "tool") messages.push_back({{"role", "user"}, {"content", text}});
    return;
  }
  Json turn = {{"role", "assistant"}, {"content", calls.empty() || !text.empty() ? Json(text) : Json(nullptr)}};
  if (!reasoning.empty()) turn["reasoning_content"] = reasoning;
  if (!calls.empty()) turn["tool_calls"] = std::move(calls);
  messages.push_back(std::move(turn));
}

Json tools_of(const Json& v) {
  Json tools = Json::array();
  for (size_t i = 0; i < as_array(v, "tools").size(); ++i) {
    const std::string p = path("tools", i);
    const Json& tool = as_object(v[i], p);
    if (const Json* t = member(tool, "type"); t && *t != "custom")
      reject(path(p, "type"), kUnsupportedValue,
             fmt::format("Unsupported value for '{}': server tools ({}) are not supported; this server runs client "
                         "tools only.", path(p, "type"), t->dump()));
    Json function = {{"name", string_at(tool, "name", path(p, "name"))}};
    for (const auto& [key, value] : tool.items()) {
      if (key == "description") function["description"] = value;
      else if (key == "input_schema") function["parameters"] = value;
      else if (key == "strict") function["strict"] = value;
      else if (key != "name" && key != "type" && key != "cache_control")
        reject(path(p, key), kUnknown, fmt::format("{}: Extra inputs are not permitted", path(p, key)));
    }
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return tools;
}

const std::set<std::string, std::less<>> kKnown = {
    "model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature", "top_p", "top_k",
    "tools", "tool_choice", "thinking", "metadata", "service_tier", "container", "mcp_servers", "context_management"};

}  // namespace

CompletionRequest parse_messages_request(const Json& body, bool count_tokens) {
  if (!body.is_object())
    throw ProtocolError(400, "The request body must be a JSON object.", "", "invalid_request_error", kInvalidType);
  for (const auto& [key, value] : body.items()) {
    if (!kKnown.contains(key)) reject(key, kUnknown, fmt::format("{}: Extra inputs are not permitted", key));
    if ((key == "container" || key == "mcp_servers" || key == "context_management") && !value.is_null())
      reject(key, kUnsupportedValue, fmt::format("Unsupported parameter: '{}' is not supported by this server.", key));
  }
  Json chat = {{"model", required(body, "model", "model")}};
  Json messages = Json::array();
  if (const Json* v = member(body, "system")) messages.push_back({{"role", "system"}, {"content", text_of(*v, "system")}});
  const Json& in = as_array(required(body, "messages", "messages"), "messages");
  for (size_t i = 0; i < in.size(); ++i) add_message(in[i], path("messages", i), messages);
  chat["messages"] = std::move(messages);
  if (!count_tokens) chat["max_tokens"] = required(body, "max_tokens", "max_tokens");
  for (const char* key : {"temperature", "top_p", "top_k", "stream"})
    if (const Json* v = member(body, key)) chat[key] = *v;
  if (const Json* v = member(body, "stop_sequences")) chat["stop"] = *v;
  if (const Json* v = member(body, "service_tier")) chat["service_tier"] = *v;
  if (const Json* v = member(body, "metadata")) {
    for (const auto& [key, value] : as_object(*v, "metadata").items()) {
      if (key != "user_id")
        reject(path("metadata", key), kUnknown, fmt::format("metadata.{}: Extra inputs are not permitted", key));
      if (!value.is_null()) chat["user"] = value;
    }
  }
  if (const Json* v = member(body, "tools")) chat["tools"] = tools_of(*v);
  if (const Json* v = member(body, "tool_choice")) {
    const std::string type = string_at(as_object(*v, "tool_choice"), "type", "tool_choice.type");
    if (type == "auto" || type == "none") chat["tool_choice"] = type;
    else if (type == "any") chat["tool_choice"] = "required";
    else if (type == "tool") chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", string_at(*v, "name", "tool_choice.name")}}}};
    else
      reject("tool_choice.type", kInvalidValue,
             fmt::format("Invalid value for 'tool_choice.type': '{}' is not one of auto, any, tool, none.", type));
    if (const Json* d = member(*v, "disable_parallel_tool_use")) {
      chat["parallel_tool_calls"] = !as_bool(*d, "tool_choice.disable_parallel_tool_use");
    }
  }
  if (const Json* v = member(body, "thinking")) {
    const std::string type = string_at(as_object(*v, "thinking"), "type", "thinking.type");
    if (type != "enabled" && type != "disabled")
      reject("thinking.type", kInvalidValue,
             fmt::format("Invalid value for 'thinking.type': '{}' is not one of enabled, disabled.", type));
    chat["chat_template_kwargs"] = {{"enable_thinking", type == "enabled"}};
    if (const Json* b = member(*v, "budget_tokens")) {
      if (!b->is_number_integer() || b->get<int64_t>() < 1)
        reject("thinking.budget_tokens", kInvalidValue, "Invalid value for 'thinking.budget_tokens': expected a positive integer.");
      if (const Json* m = member(body, "max_tokens"); m && m->is_number_integer() && b->get<int64_t>() >= m->get<int64_t>())
        reject("thinking.budget_tokens", kInvalidValue, "Invalid value for 'thinking.budget_tokens': it must be less than max_tokens.");
    }
  }
  try {
    return parse_chat_request(chat);
  } catch (const ProtocolError& e) {
    // Chat's field names as this API spells them.
    std::string param = e.param(), message = e.message();
    auto rename = [&](const std::string& from, const std::string& to) { return rename_field(param, message, from, to); };
    rename("stop", "stop_sequences") || rename("user", "metadata.user_id") ||
        rename("parallel_tool_calls", "tool_choice.disable_parallel_tool_use") ||
        rename("tool_choice.function", "tool_choice") || rename("chat_template_kwargs.enable_thinking", "thinking.type");
    if (param.rfind("tools[", 0) == 0) {
      if (const size_t f = param.find("].function.parameters"); f != std::string::npos)
        rename(param.substr(0, f + 21), param.substr(0, f + 1) + ".input_schema");
      else if (const size_t g = param.find("].function"); g != std::string::npos)
        rename(param.substr(0, g + 10), param.substr(0, g + 1));
    }
    if (param.rfind("messages", 0) == 0 && param != "messages") {
      message = fmt::format("In 'messages' ({} of the chat messages they become): {}", param, message);
      param = "messages";
    }
    throw ProtocolError(e.status(), std::move(message), std::move(param), e.type(), e.code());
  }
}

Json messages_error_body(const ProtocolError& e) {
  const int s = e.status();
  const char* type = s == 401   ? "authentication_error"
                     : s == 403 ? "permission_error"
                     : s == 404 ? "not_found_error"
                     : s == 413 ? "request_too_large"
                     : s == 429 ? "rate_limit_error"
                     : s == 503 ? "overloaded_error"
                     : s >= 500 ? "api_error"
                                : "invalid_request_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.message()}}}};
}

}  // namespace rocket
