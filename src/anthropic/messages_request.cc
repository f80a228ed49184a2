#include "anthropic/messages_request.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "openai/image_input.h"
#include "openai/json_fields.h"
#include "openai/sealed_reasoning.h"

namespace rocket {

using Json = nlohmann::ordered_json;
using namespace json_fields;

namespace {

// What the translation collects besides the chat body: cache_control marks (recorded on the span),
// the deferred tools a tool_reference loaded.
struct Translation {
  int64_t cache_marks = 0;
  std::set<std::string, std::less<>> referenced_tools;
};

// A block's cache_control: {type: "ephemeral", ttl?}. Counted; the prefix cache keeps every prompt's
// pages, marked or not.
void note_cache_control(const Json& block, const std::string& param, Translation& t) {
  const Json* c = member(block, "cache_control");
  if (!c) return;
  const std::string p = path(param, "cache_control");
  const std::string type = string_at(as_object(*c, p), "type", path(p, "type"));
  if (type != "ephemeral")
    reject(path(p, "type"), kInvalidValue, fmt::format("Invalid value for '{}': '{}' is not 'ephemeral'.", path(p, "type"), type));
  ++t.cache_marks;
}

[[noreturn]] void unsupported_block(const std::string& param, const std::string& type) {
  reject(param, kUnsupportedValue,
         fmt::format("Unsupported value for '{}': '{}' blocks are not supported; this engine reads text and runs "
                     "client tools only.", param, type));
}

// The text of a text block `p`; a tool result's content may also hold tool_reference blocks, which
// load a deferred tool (`references`: whether they are allowed).
std::string block_text(const Json& block, const std::string& p, Translation& t, bool references) {
  const std::string type = string_at(as_object(block, p), "type", path(p, "type"));
  note_cache_control(block, p, t);
  if (type == "text") return string_at(block, "text", path(p, "text"));
  if (references && type == "tool_reference") {
    const std::string name = string_at(block, "tool_name", path(p, "tool_name"));
    t.referenced_tools.insert(name);
    return fmt::format("Tool '{}' is now available.", name);
  }
  unsupported_block(path(p, "type"), type);
}

// The text of a string or of text blocks (and tool_reference blocks where `references`), joined by '\n'.
std::string text_of(const Json& v, const std::string& param, Translation& t, bool references = false) {
  if (v.is_string()) return v.get<std::string>();
  std::string text;
  for (size_t i = 0; i < as_array(v, param).size(); ++i) {
    if (i > 0) text += '\n';
    text += block_text(v[i], path(param, i), t, references);
  }
  return text;
}

// A thinking block's reasoning: what its signature seals when this server signed it (a block sent
// back with display "omitted" has no text), else its text.
std::string thinking_of(const Json& block, const std::string& param) {
  const std::string text = string_at(block, "thinking", path(param, "thinking"));
  if (const Json* s = member(block, "signature"))
    if (std::optional<std::string> sealed = open_reasoning(as_string(*s, path(param, "signature")))) return *sealed;
  return text;
}

// An image block ({"type": "image", "source": {"type": "base64", "media_type", "data"}}, Anthropic's
// shape) as chat's image_url part with the data: URL it stands for, which the chat parser decodes and
// bounds. A source of type url is a remote image, which Rocket does not fetch; file needs stored files.
Json image_of(const Json& block, const std::string& param) {
  const std::string sp = path(param, "source");
  const Json& source = as_object(required(block, "source", sp), sp);
  const std::string type = string_at(source, "type", path(sp, "type"));
  if (type == "url")
    reject(path(sp, "type"), kUnsupportedValue,
           fmt::format("Unsupported value for '{}': remote image URLs are not fetched; send the image as base64 "
                       "({{\"type\": \"base64\", \"media_type\": \"image/png\", \"data\": ...}}).", path(sp, "type")));
  if (type != "base64")
    reject(path(sp, "type"), kUnsupportedValue,
           fmt::format("Unsupported value for '{}': '{}' image sources are not supported; send the image as base64.",
                       path(sp, "type"), type));
  for (const auto& [key, value] : source.items())
    if (key != "type" && key != "media_type" && key != "data")
      reject(path(sp, key), kUnknown, fmt::format("{}: Extra inputs are not permitted", path(sp, key)));
  const std::string media_type = string_at(source, "media_type", path(sp, "media_type"));
  if (!accepted_image_media_type(media_type))
    reject(path(sp, "media_type"), kInvalidValue,
           fmt::format("Invalid value for '{}': '{}' is not one of image/png, image/jpeg, image/webp (the types this "
                       "server decodes).", path(sp, "media_type"), media_type));
  const Json& data = required(source, "data", path(sp, "data"));
  return {{"type", "image_url"},
          {"image_url", {{"url", "data:" + media_type + ";base64," + as_string(data, path(sp, "data"))}}}};
}

// A tool_result's content for the chat tool message: its text (text_of's) where it holds no image;
// else its blocks in order as chat's text and image_url parts (a screenshot a tool returned), which the
// template places inside the tool response. tool_reference blocks load a deferred tool either way.
Json tool_result_of(const Json& v, const std::string& param, Translation& t) {
  if (v.is_string()) return v;
  bool images = false;
  for (size_t i = 0; i < as_array(v, param).size(); ++i)
    if (const Json* type = member(as_object(v[i], path(param, i)), "type"); type && *type == "image") images = true;
  if (!images) return text_of(v, param, t, /*references=*/true);
  Json parts = Json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = path(param, i);
    const std::string type = string_at(v[i], "type", path(p, "type"));
    if (type == "image") {
      note_cache_control(v[i], p, t);
      parts.push_back(image_of(v[i], p));
    } else {
      parts.push_back({{"type", "text"}, {"text", block_text(v[i], p, t, /*references=*/true)}});
    }
  }
  return parts;
}

// One Anthropic message as chat messages: a user turn's tool results become tool messages ahead of
// its text; an assistant turn stays one message; a system message (Claude Code puts its context
// mid-conversation) stays where it is.
void add_message(const Json& m, const std::string& p, Json& messages, Translation& t) {
  as_object(m, p);
  const std::string role = string_at(m, "role", path(p, "role"));
  if (role != "user" && role != "assistant" && role != "system")
    reject(path(p, "role"), kInvalidValue,
           fmt::format("Invalid value for '{}': '{}' is not one of user, assistant, system.", path(p, "role"), role));
  const Json& content = required(m, "content", path(p, "content"));
  const std::string cp = path(p, "content");
  if (content.is_string() || role == "system") {
    messages.push_back({{"role", role}, {"content", text_of(content, cp, t)}});
    return;
  }
  std::string text, reasoning;
  Json calls = Json::array();
  Json parts = Json::array();  // a user turn's text and images in order, kept where it has an image
  bool images = false;
  for (size_t i = 0; i < as_array(content, cp).size(); ++i) {
    const std::string bp = path(cp, i);
    const Json& block = as_object(content[i], bp);
    const std::string type = string_at(block, "type", path(bp, "type"));
    note_cache_control(block, bp, t);
    if (type == "text") {
      const std::string t = string_at(block, "text", path(bp, "text"));
      if (!text.empty()) text += '\n';
      text += t;
      parts.push_back({{"type", "text"}, {"text", t}});
    } else if (role == "user" && type == "image") {
      parts.push_back(image_of(block, bp));
      images = true;
    } else if (role == "user" && type == "tool_result") {
      const Json* result = member(block, "content");
      if (const Json* e = member(block, "is_error")) as_bool(*e, path(bp, "is_error"));
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_at(block, "tool_use_id", path(bp, "tool_use_id"))},
                          {"content", result ? tool_result_of(*result, path(bp, "content"), t) : Json(std::string())}});
    } else if (role == "assistant" && type == "tool_use") {
      const Json& input = as_object(required(block, "input", path(bp, "input")), path(bp, "input"));
      calls.push_back({{"id", string_at(block, "id", path(bp, "id"))},
                       {"type", "function"},
                       {"function", {{"name", string_at(block, "name", path(bp, "name"))}, {"arguments", input.dump()}}}});
    } else if (role == "assistant" && type == "thinking") {
      if (!reasoning.empty()) reasoning += '\n';
      reasoning += thinking_of(block, bp);
    } else if (role == "assistant" && type == "redacted_thinking") {
      // Encrypted reasoning: ours opens (this server seals none this way yet), another provider's does not.
      if (std::optional<std::string> r = open_reasoning(string_at(block, "data", path(bp, "data")))) {
        if (!reasoning.empty()) reasoning += '\n';
        reasoning += *r;
      }
    } else {
      unsupported_block(path(bp, "type"), type);
    }
  }
  if (role == "user") {
    // A turn of tool results alone needs no user message after them.
    if (images) messages.push_back({{"role", "user"}, {"content", std::move(parts)}});
    else if (!text.empty() || messages.empty() || messages.back()["role"] != "tool") messages.push_back({{"role", "user"}, {"content", text}});
    return;
  }
  Json turn = {{"role", "assistant"}, {"content", calls.empty() || !text.empty() ? Json(text) : Json(nullptr)}};
  if (!reasoning.empty()) turn["reasoning_content"] = reasoning;
  if (!calls.empty()) turn["tool_calls"] = std::move(calls);
  messages.push_back(std::move(turn));
}

// Server tools: Anthropic runs them, this server cannot; they are left out of the model's tools.
bool server_tool(std::string_view type) {
  for (std::string_view prefix : {"web_search_", "web_fetch_", "code_execution_", "tool_search_tool_"})
    if (type.substr(0, prefix.size()) == prefix) return true;
  return false;
}

// The tools offered to the model, as chat's: client tools with their schemas, a deferred one only
// once a tool_reference has loaded it.
Json tools_of(const Json& v, Translation& t, MessagesRequest& r) {
  Json tools = Json::array();
  for (size_t i = 0; i < as_array(v, "tools").size(); ++i) {
    const std::string p = path("tools", i);
    const Json& tool = as_object(v[i], p);
    note_cache_control(tool, p, t);
    if (const Json* type = member(tool, "type"); type && *type != "custom") {
      const std::string name = as_string(*type, path(p, "type"));
      if (server_tool(name)) {
        r.server_tools.push_back(name);
        continue;
      }
      reject(path(p, "type"), kUnsupportedValue,
             fmt::format("Unsupported value for '{}': '{}' is an Anthropic-defined tool whose schema this server does "
                         "not have; define it as a client tool (name, description, input_schema).", path(p, "type"), name));
    }
    const std::string name = string_at(tool, "name", path(p, "name"));
    Json function = {{"name", name}};
    bool deferred = false;
    for (const auto& [key, value] : tool.items()) {
      if (key == "description") function["description"] = value;
      else if (key == "input_schema") function["parameters"] = value;
      else if (key == "strict") function["strict"] = value;
      else if (key == "defer_loading") deferred = !value.is_null() && as_bool(value, path(p, key));
      else if (key == "eager_input_streaming") as_bool(value, path(p, key));  // inputs stream as they come anyway
      else if (key != "name" && key != "type" && key != "cache_control")
        reject(path(p, key), kUnknown, fmt::format("{}: Extra inputs are not permitted", path(p, key)));
    }
    if (deferred && !t.referenced_tools.contains(name)) continue;
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return tools;
}

// Anthropic's effort levels as reasoning_effort's.
std::string effort_of(const Json& v) {
  const std::string effort = as_string(v, "output_config.effort");
  if (effort == "low" || effort == "medium" || effort == "high") return effort;
  if (effort == "max") return "high";
  reject("output_config.effort", kInvalidValue,
         fmt::format("Invalid value for 'output_config.effort': '{}' is not one of low, medium, high, max.", effort));
}

void parse_output_config(const Json& v, Json& chat) {
  for (const auto& [key, value] : as_object(v, "output_config").items()) {
    if (value.is_null()) continue;
    if (key == "effort") {
      chat["reasoning_effort"] = effort_of(value);
    } else if (key == "format") {
      const std::string p = "output_config.format";
      const std::string type = string_at(as_object(value, p), "type", path(p, "type"));
      if (type != "json_schema")
        reject(path(p, "type"), kInvalidValue, fmt::format("Invalid value for '{}': '{}' is not 'json_schema'.", path(p, "type"), type));
      chat["response_format"] = {{"type", "json_schema"},
                                 {"json_schema", {{"name", "output"}, {"schema", required(value, "schema", path(p, "schema"))}}}};
    } else {
      reject(path("output_config", key), kUnknown, fmt::format("output_config.{}: Extra inputs are not permitted", key));
    }
  }
}

int64_t positive(const Json& v, const std::string& param) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1)
    reject(param, kInvalidValue, fmt::format("Invalid value for '{}': expected a positive integer.", param));
  return v.get<int64_t>();
}

// {type: "input_tokens" | "tool_uses", value} (what `types` allows), as its type and value.
std::pair<std::string, int64_t> threshold(const Json& v, const std::string& param, std::initializer_list<const char*> types) {
  as_object(v, param);
  const std::string type = string_at(v, "type", path(param, "type"));
  if (std::none_of(types.begin(), types.end(), [&](const char* t) { return type == t; }))
    reject(path(param, "type"), kInvalidValue,
           fmt::format("Invalid value for '{}': '{}' is not one of {}.", path(param, "type"), type, fmt::join(types, ", ")));
  return {type, positive(required(v, "value", path(param, "value")), path(param, "value"))};
}

MessagesRequest::Edit parse_edit(const Json& e, const std::string& p) {
  const std::string type = string_at(as_object(e, p), "type", path(p, "type"));
  MessagesRequest::Edit edit;
  if (type == "clear_thinking_20251015") {
    ClearThinking c;
    for (const auto& [key, value] : e.items()) {
      if (key == "keep") {
        if (value == "all") c.keep_turns.reset();
        else c.keep_turns = threshold(value, path(p, "keep"), {"thinking_turns"}).second;
      } else if (key != "type") {
        reject(path(p, key), kUnknown, fmt::format("{}: Extra inputs are not permitted", path(p, key)));
      }
    }
    edit.thinking = c;
  } else if (type == "clear_tool_uses_20250919") {
    ClearToolUses c;
    for (const auto& [key, value] : e.items()) {
      const std::string kp = path(p, key);
      if (value.is_null() || key == "type") continue;
      if (key == "trigger") {
        const auto [t, n] = threshold(value, kp, {"input_tokens", "tool_uses"});
        c.trigger = t == "input_tokens" ? ClearToolUses::Trigger::kInputTokens : ClearToolUses::Trigger::kToolUses;
        c.trigger_value = n;
      } else if (key == "keep") {
        c.keep = threshold(value, kp, {"tool_uses"}).second;
      } else if (key == "clear_at_least") {
        c.clear_at_least = threshold(value, kp, {"input_tokens"}).second;
      } else if (key == "exclude_tools") {
        for (size_t i = 0; i < as_array(value, kp).size(); ++i) c.exclude_tools.insert(as_string(value[i], path(kp, i)));
      } else if (key == "clear_tool_inputs") {
        if (value.is_boolean()) {
          c.clear_all_inputs = value.get<bool>();
        } else if (value.is_array()) {
          for (size_t i = 0; i < value.size(); ++i) c.clear_inputs_of.insert(as_string(value[i], path(kp, i)));
        } else {
          wrong_type(kp, "a boolean or an array of tool names", value);
        }
      } else {
        reject(kp, kUnknown, fmt::format("{}: Extra inputs are not permitted", kp));
      }
    }
    edit.tool_uses = c;
  } else {
    reject(path(p, "type"), kInvalidValue,
           fmt::format("Invalid value for '{}': '{}' is not one of clear_thinking_20251015, clear_tool_uses_20250919 "
                       "(compaction is not supported: send the conversation compacted).", path(p, "type"), type));
  }
  return edit;
}

const std::set<std::string, std::less<>> kKnown = {
    "model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature", "top_p", "top_k",
    "tools", "tool_choice", "thinking", "metadata", "service_tier", "container", "mcp_servers", "context_management",
    "output_config"};

}  // namespace

MessagesRequest parse_messages_request(const Json& body, bool count_tokens, const ImageBounds& images) {
  if (!body.is_object())
    throw ProtocolError(400, "The request body must be a JSON object.", "", "invalid_request_error", kInvalidType);
  for (const auto& [key, value] : body.items()) {
    if (!kKnown.contains(key)) reject(key, kUnknown, fmt::format("{}: Extra inputs are not permitted", key));
    if (key == "container" && !value.is_null())
      reject(key, kUnsupportedValue, "Unsupported parameter: 'container': this server runs no code execution containers.");
    if (key == "mcp_servers" && !value.is_null() && !(value.is_array() && value.empty()))
      reject(key, kUnsupportedValue,
             "Unsupported parameter: 'mcp_servers': this server connects to no MCP servers; run them in the client and "
             "send their tools as client tools.");
  }
  MessagesRequest r;
  Translation t;
  Json chat = {{"model", required(body, "model", "model")}};
  Json messages = Json::array();
  if (const Json* v = member(body, "system")) messages.push_back({{"role", "system"}, {"content", text_of(*v, "system", t)}});
  const Json& in = as_array(required(body, "messages", "messages"), "messages");
  for (size_t i = 0; i < in.size(); ++i) add_message(in[i], path("messages", i), messages, t);
  chat["messages"] = std::move(messages);
  if (!count_tokens) chat["max_tokens"] = required(body, "max_tokens", "max_tokens");
  for (const char* key : {"temperature", "top_p", "top_k", "stream", "service_tier"})
    if (const Json* v = member(body, key)) chat[key] = *v;
  if (const Json* v = member(body, "stop_sequences")) chat["stop"] = *v;
  if (const Json* v = member(body, "metadata")) {
    for (const auto& [key, value] : as_object(*v, "metadata").items()) {
      if (key != "user_id")
        reject(path("metadata", key), kUnknown, fmt::format("metadata.{}: Extra inputs are not permitted", key));
      if (value.is_null()) continue;
      chat["user"] = value;
      chat["metadata"] = {{"user_id", value}};
    }
  }
  if (const Json* v = member(body, "tools")) chat["tools"] = tools_of(*v, t, r);
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
  std::optional<int64_t> budget;
  bool thinking_enabled = false;  // the budget closes reasoning the template opened (type enabled)
  if (const Json* v = member(body, "thinking")) {
    const std::string type = string_at(as_object(*v, "thinking"), "type", "thinking.type");
    if (type != "enabled" && type != "disabled" && type != "adaptive")
      reject("thinking.type", kInvalidValue,
             fmt::format("Invalid value for 'thinking.type': '{}' is not one of enabled, disabled, adaptive.", type));
    // adaptive: the model decides whether to think, which is the chat template's default.
    if (type != "adaptive") chat["chat_template_kwargs"] = {{"enable_thinking", type == "enabled"}};
    thinking_enabled = type == "enabled";
    if (const Json* b = member(*v, "budget_tokens")) {
      budget = positive(*b, "thinking.budget_tokens");
      if (const Json* m = member(body, "max_tokens"); m && m->is_number_integer() && *budget >= m->get<int64_t>())
        reject("thinking.budget_tokens", kInvalidValue, "Invalid value for 'thinking.budget_tokens': it must be less than max_tokens.");
    }
    if (const Json* d = member(*v, "display")) {
      const std::string display = as_string(*d, "thinking.display");
      if (display != "summarized" && display != "omitted")
        reject("thinking.display", kInvalidValue,
               fmt::format("Invalid value for 'thinking.display': '{}' is not one of summarized, omitted.", display));
      r.omit_thinking = display == "omitted";
    }
    for (const auto& [key, value] : v->items())
      if (key != "type" && key != "budget_tokens" && key != "display")
        reject(path("thinking", key), kUnknown, fmt::format("thinking.{}: Extra inputs are not permitted", key));
  }
  if (const Json* v = member(body, "output_config")) parse_output_config(*v, chat);
  if (const Json* v = member(body, "context_management")) {
    r.context_management = true;
    for (const auto& [key, value] : as_object(*v, "context_management").items())
      if (key != "edits")
        reject(path("context_management", key), kUnknown, fmt::format("context_management.{}: Extra inputs are not permitted", key));
    if (const Json* edits = member(*v, "edits"))
      for (size_t i = 0; i < as_array(*edits, "context_management.edits").size(); ++i)
        r.edits.push_back(parse_edit((*edits)[i], path("context_management.edits", i)));
  }
  try {
    r.chat = parse_chat_request(chat, images, /*tool_result_images=*/true);
  } catch (const ProtocolError& e) {
    // Chat's field names as this API spells them.
    std::string param = e.param(), message = e.message();
    auto rename = [&](const std::string& from, const std::string& to) { return rename_field(param, message, from, to); };
    rename("stop", "stop_sequences") || rename("user", "metadata.user_id") ||
        rename("parallel_tool_calls", "tool_choice.disable_parallel_tool_use") ||
        rename("tool_choice.function", "tool_choice") || rename("chat_template_kwargs.enable_thinking", "thinking.type") ||
        rename("reasoning_effort", "output_config.effort") || rename("response_format.json_schema", "output_config.format") ||
        rename("response_format", "output_config.format");
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
  r.chat.reasoning_effort_hint = true;
  if (budget) r.chat.client_attributes.emplace_back("thinking.budget_tokens", std::to_string(*budget));
  if (budget && thinking_enabled) r.chat.reasoning_budget = *budget;
  if (t.cache_marks > 0) r.chat.client_attributes.emplace_back("cache_control", std::to_string(t.cache_marks));
  if (!r.server_tools.empty())
    r.chat.client_attributes.emplace_back("server_tools_not_offered", fmt::format("{}", fmt::join(r.server_tools, ",")));
  return r;
}

namespace {

// The name of the call each tool message answers (tool_call_id -> name), from the assistant turns.
std::map<std::string, std::string, std::less<>> call_names(const CompletionRequest& c) {
  std::map<std::string, std::string, std::less<>> names;
  for (const ChatMessage& m : c.messages)
    for (const ToolCall& call : m.tool_calls) names[call.id] = call.name;
  return names;
}

// clear_thinking: the number of assistant turns whose reasoning it dropped.
int64_t clear_thinking(CompletionRequest& c, const ClearThinking& edit) {
  if (!edit.keep_turns) return 0;
  int64_t kept = 0, cleared = 0;
  for (auto m = c.messages.rbegin(); m != c.messages.rend(); ++m) {
    if (m->role != "assistant" || m->reasoning_content.empty()) continue;
    if (kept < *edit.keep_turns) {
      ++kept;
    } else {
      m->reasoning_content.clear();
      ++cleared;
    }
  }
  return cleared;
}

// Takes message `m`'s images out of the request (a cleared tool result shows none): its parts go, the
// images leave `c.images`, and every later image part's index moves down past them.
void drop_images(CompletionRequest& c, ChatMessage& m) {
  std::vector<int> gone;
  for (const ChatMessage::Part& part : m.parts)
    if (part.image >= 0) gone.push_back(part.image);
  m.parts.clear();
  if (gone.empty()) return;
  std::sort(gone.begin(), gone.end());
  for (ChatMessage& other : c.messages)
    for (ChatMessage::Part& part : other.parts)
      if (part.image >= 0) part.image -= int(std::lower_bound(gone.begin(), gone.end(), part.image) - gone.begin());
  for (auto it = gone.rbegin(); it != gone.rend(); ++it) c.images.erase(c.images.begin() + *it);
}

// clear_tool_uses, once triggered: the number of tool results it replaced (with their images).
int64_t clear_tool_uses(CompletionRequest& c, const ClearToolUses& edit) {
  const auto names = call_names(c);
  std::vector<ChatMessage*> results;
  for (ChatMessage& m : c.messages)
    if (m.role == "tool") results.push_back(&m);
  const size_t keep = size_t(std::min<int64_t>(edit.keep, int64_t(results.size())));
  int64_t cleared = 0;
  for (size_t i = 0; i + keep < results.size(); ++i) {
    ChatMessage& m = *results[i];
    const auto name = names.find(m.tool_call_id);
    const std::string tool = name == names.end() ? std::string() : name->second;
    if (edit.exclude_tools.contains(tool) || m.content == kClearedToolResult) continue;
    m.content = kClearedToolResult;
    drop_images(c, m);
    ++cleared;
    if (!edit.clear_all_inputs && !edit.clear_inputs_of.contains(tool)) continue;
    for (ChatMessage& turn : c.messages)
      for (ToolCall& call : turn.tool_calls)
        if (call.id == m.tool_call_id) call.arguments = "{}";
  }
  return cleared;
}

}  // namespace

Json apply_context_edits(MessagesRequest& r, const std::function<int64_t(const CompletionRequest&)>& count) {
  Json applied = Json::array();
  for (const MessagesRequest::Edit& edit : r.edits) {
    CompletionRequest edited = r.chat;
    if (edit.thinking) {
      const int64_t turns = clear_thinking(edited, *edit.thinking);
      if (turns == 0) continue;
      const int64_t freed = count(r.chat) - count(edited);
      applied.push_back({{"type", "clear_thinking_20251015"}, {"cleared_thinking_turns", turns}, {"cleared_input_tokens", freed}});
    } else {
      const ClearToolUses& c = *edit.tool_uses;
      std::optional<int64_t> before;
      if (c.trigger == ClearToolUses::Trigger::kInputTokens) {
        before = count(r.chat);
        if (*before <= c.trigger_value) continue;
      } else {
        const int64_t uses = std::count_if(r.chat.messages.begin(), r.chat.messages.end(),
                                           [](const ChatMessage& m) { return m.role == "tool"; });
        if (uses <= c.trigger_value) continue;
      }
      const int64_t uses = clear_tool_uses(edited, c);
      if (uses == 0) continue;
      if (!before) before = count(r.chat);
      const int64_t freed = *before - count(edited);
      if (freed < c.clear_at_least) continue;  // not worth the cache it would invalidate
      applied.push_back({{"type", "clear_tool_uses_20250919"}, {"cleared_tool_uses", uses}, {"cleared_input_tokens", freed}});
    }
    r.chat = std::move(edited);
  }
  return applied;
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
