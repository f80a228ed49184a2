#include "openai/responses_request.h"

#include <set>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "openai/json_fields.h"
#include "openai/sealed_reasoning.h"

namespace rocket {

using Json = nlohmann::ordered_json;
using namespace json_fields;

namespace {

// An input_image part ({"type": "input_image", "image_url": URL, "detail"}, OpenAI's Responses shape;
// `image_url` as chat's {"url", "detail"} object is taken too, as some clients send it) as chat's
// image_url part, which the chat parser decodes and bounds. file_id needs stored files: refused.
Json image_of(const Json& part, const std::string& param) {
  for (const auto& [key, value] : part.items())
    if (key != "type" && key != "image_url" && key != "detail" && key != "file_id")
      reject(path(param, key), kUnknown, fmt::format("Unrecognized request argument supplied: {}", path(param, key)));
  if (member(part, "file_id"))
    reject(path(param, "file_id"), kUnsupportedValue,
           fmt::format("Unsupported value for '{}': this server stores no files; send the image as a data: URL in "
                       "image_url (data:image/png;base64,...).", path(param, "file_id")));
  Json image_url = Json::object();
  const std::string p = path(param, "image_url");
  const Json& url = required(part, "image_url", p);
  if (url.is_object()) {
    image_url = url;
  } else {
    image_url["url"] = as_string(url, p);
  }
  if (const Json* d = member(part, "detail")) {
    const std::string detail = as_string(*d, path(param, "detail"));
    // "original" is Responses' own (no downscaling); Qwen's processor has one rule, the plan's pixel
    // bounds, so every detail is checked and changes nothing.
    if (detail != "auto" && detail != "low" && detail != "high" && detail != "original")
      reject(path(param, "detail"), kInvalidValue,
             fmt::format("Invalid value for '{}': '{}' is not one of auto, low, high, original.", path(param, "detail"),
                         detail));
  }
  return {{"type", "image_url"}, {"image_url", std::move(image_url)}};
}

// A message's content for the chat parser: a string, or its text and image parts.
Json content_of(const Json& v, const std::string& param) {
  if (v.is_string()) return v;
  if (!v.is_array())
    wrong_type(param, "a string or an array of content parts", v);
  Json parts = Json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = path(param, i);
    const std::string type = string_at(as_object(v[i], p), "type", path(p, "type"));
    if (type == "input_text" || type == "output_text") {
      parts.push_back({{"type", "text"}, {"text", string_at(v[i], "text", path(p, "text"))}});
    } else if (type == "refusal") {
      parts.push_back({{"type", "text"}, {"text", string_at(v[i], "refusal", path(p, "refusal"))}});
    } else if (type == "input_image") {
      parts.push_back(image_of(v[i], p));
    } else {
      reject(path(p, "type"), kUnsupportedValue,
             fmt::format("Unsupported value for '{}': content parts of type '{}' are not supported; this engine reads "
                         "text and images.", path(p, "type"), type));
    }
  }
  return parts;
}

// A reasoning item's text: its reasoning_text content, else its summary, else the encrypted_content
// this server sealed (another provider's opens to nothing and is dropped).
std::string reasoning_of(const Json& item, const std::string& param) {
  std::string text;
  for (const char* key : {"content", "summary"}) {
    const Json* parts = member(item, key);
    if (!parts) continue;
    as_array(*parts, path(param, key));
    for (size_t i = 0; i < parts->size(); ++i) {
      const std::string p = path(path(param, key), i);
      as_object((*parts)[i], p);
      if (!text.empty()) text += "\n\n";
      text += string_at((*parts)[i], "text", path(p, "text"));
    }
    if (!text.empty()) return text;
  }
  if (const Json* e = member(item, "encrypted_content"))
    if (std::optional<std::string> sealed = open_reasoning(as_string(*e, path(param, "encrypted_content")))) return *sealed;
  return text;
}

// `instructions` and `input` as chat messages.
Json messages_of(const Json& body) {
  Json messages = Json::array();
  if (const Json* v = member(body, "instructions")) messages.push_back({{"role", "system"}, {"content", as_string(*v, "instructions")}});
  const Json* input = &required(body, "input", "input");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
    return messages;
  }
  if (!input->is_array())
    wrong_type("input", "a string or an array of input items", *input);
  std::string reasoning;  // a reasoning item's text, for the assistant turn after it
  // Whether the last message is an assistant turn the next function_call joins.
  bool open_turn = false;
  auto assistant_turn = [&](Json content) -> Json& {
    Json m = {{"role", "assistant"}, {"content", std::move(content)}};
    if (!reasoning.empty()) m["reasoning_content"] = std::exchange(reasoning, {});
    messages.push_back(std::move(m));
    open_turn = true;
    return messages.back();
  };
  for (size_t i = 0; i < input->size(); ++i) {
    const std::string p = path("input", i);
    const Json& item = as_object((*input)[i], p);
    const Json* t = member(item, "type");
    const std::string type = t ? as_string(*t, path(p, "type")) : "message";
    if (type == "message") {
      const std::string role = string_at(item, "role", path(p, "role"));
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        reject(path(p, "role"), kInvalidValue,
               fmt::format("Invalid value for '{}': '{}' is not one of user, assistant, system, developer.", path(p, "role"), role));
      const Json& content = required(item, "content", path(p, "content"));
      if (role == "assistant") {
        assistant_turn(content_of(content, path(p, "content")));
      } else {
        messages.push_back({{"role", role}, {"content", content_of(content, path(p, "content"))}});
        open_turn = false;
      }
    } else if (type == "function_call") {
      Json call = {{"id", string_at(item, "call_id", path(p, "call_id"))},
                   {"type", "function"},
                   {"function", {{"name", string_at(item, "name", path(p, "name"))},
                                 {"arguments", string_at(item, "arguments", path(p, "arguments"))}}}};
      Json& turn = open_turn ? messages.back() : assistant_turn(nullptr);
      turn["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      // The output: a string, or a list of input_text and input_image items (OpenAI's
      // ResponseFunctionCallOutputItemList; a screenshot from a tool), as a tool message whose images the
      // template places inside the tool response.
      const Json& output = required(item, "output", path(p, "output"));
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_at(item, "call_id", path(p, "call_id"))},
                          {"content", content_of(output, path(p, "output"))}});
      open_turn = false;
    } else if (type == "reasoning") {
      reasoning = reasoning_of(item, p);
      open_turn = false;
    } else if (type == "item_reference") {
      reject(path(p, "type"), kUnsupportedValue,
             "Unsupported value: item references need stored responses, and this server stores none; send the items "
             "themselves.");
    } else {
      reject(path(p, "type"), kUnsupportedValue,
             fmt::format("Unsupported value for '{}': input items of type '{}' are not supported; this server runs "
                         "messages, reasoning and function calls only.", path(p, "type"), type));
    }
  }
  return messages;
}

// Hosted tools: OpenAI runs them, this server cannot; they are left out of the model's tools.
bool hosted_tool(std::string_view type) {
  for (std::string_view t : {"web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11",
                             "file_search", "code_interpreter", "image_generation", "computer_use_preview", "mcp"})
    if (type == t) return true;
  return false;
}

// A function tool {type, name, description, parameters, strict} as chat's.
Json function_of(const Json& tool, const std::string& p) {
  Json function = Json::object();
  for (const auto& [key, value] : tool.items()) {
    if (key == "type") continue;
    if (key != "name" && key != "description" && key != "parameters" && key != "strict")
      reject(path(p, key), kUnknown, fmt::format("Unrecognized request argument supplied: {}", path(p, key)));
    function[key] = value;
  }
  return {{"type", "function"}, {"function", std::move(function)}};
}

// The tools offered to the model, as chat's: function tools, and those of each namespace under their
// own names (`namespace_of` maps them back); hosted tools are not offered. `echo`: the request's
// tools less the hosted ones, as the response lists them.
Json tools_of(const Json& v, std::map<std::string, std::string, std::less<>>& namespace_of, Json& echo) {
  Json tools = Json::array();
  echo = Json::array();
  std::set<std::string, std::less<>> names;  // a namespace's function may not shadow another tool
  const auto add = [&](const Json& tool, const std::string& p) {
    if (const Json* n = member(tool, "name"); n && n->is_string() && !names.insert(n->get<std::string>()).second)
      reject(path(p, "name"), kInvalidValue,
             fmt::format("Invalid value for '{}': a second tool named '{}' (namespaces are flattened into one list).",
                         path(p, "name"), n->get<std::string>()));
    tools.push_back(function_of(tool, p));
  };
  for (size_t i = 0; i < as_array(v, "tools").size(); ++i) {
    const std::string p = path("tools", i);
    const Json& tool = as_object(v[i], p);
    const std::string type = string_at(tool, "type", path(p, "type"));
    if (hosted_tool(type)) continue;
    echo.push_back(tool);
    if (type == "function") {
      add(tool, p);
    } else if (type == "namespace") {
      const std::string ns = string_at(tool, "name", path(p, "name"));
      for (const auto& [key, value] : tool.items())
        if (key != "type" && key != "name" && key != "description" && key != "tools")
          reject(path(p, key), kUnknown, fmt::format("Unrecognized request argument supplied: {}", path(p, key)));
      const Json& inner = as_array(required(tool, "tools", path(p, "tools")), path(p, "tools"));
      for (size_t j = 0; j < inner.size(); ++j) {
        const std::string ip = path(path(p, "tools"), j);
        const std::string inner_type = string_at(as_object(inner[j], ip), "type", path(ip, "type"));
        if (inner_type != "function")
          reject(path(ip, "type"), kUnsupportedValue,
                 fmt::format("Unsupported value for '{}': a namespace's '{}' tools are not supported; this server runs "
                             "function tools only.", path(ip, "type"), inner_type));
        add(inner[j], ip);
        namespace_of[string_at(inner[j], "name", path(ip, "name"))] = ns;
      }
    } else {
      reject(path(p, "type"), kUnsupportedValue,
             fmt::format("Unsupported value for '{}': '{}' tools are not supported; this server runs function tools "
                         "(and namespaces of them) only.", path(p, "type"), type));
    }
  }
  return tools;
}

Json tool_choice_of(const Json& v) {
  if (v.is_string()) return v;
  const std::string type = string_at(as_object(v, "tool_choice"), "type", "tool_choice.type");
  if (type != "function")
    reject("tool_choice.type", kUnsupportedValue,
           fmt::format("Unsupported value for 'tool_choice.type': '{}'; this server takes 'none', 'auto', 'required' or "
                       "{{\"type\": \"function\", \"name\": ...}}.", type));
  return {{"type", "function"}, {"function", {{"name", string_at(v, "name", "tool_choice.name")}}}};
}

// text.format as chat's response_format; absent or "text" is none.
Json response_format_of(const Json& text) {
  as_object(text, "text");
  for (const auto& [key, value] : text.items())
    if (key != "format" && key != "verbosity")
      reject(path("text", key), kUnknown, fmt::format("Unrecognized request argument supplied: text.{}", key));
  const Json* format = member(text, "format");
  if (!format) return nullptr;
  const std::string type = string_at(as_object(*format, "text.format"), "type", "text.format.type");
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema")
    reject("text.format.type", kInvalidValue,
           fmt::format("Invalid value for 'text.format.type': '{}' is not one of text, json_object, json_schema.", type));
  Json schema = Json::object();
  for (const auto& [key, value] : format->items())
    if (key != "type") schema[key] = value;
  return {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

// Responses fields that are chat's under the same name, checked by parse_chat_request: the sampling
// knobs (vLLM's too, as its Responses endpoint takes them) and the bookkeeping fields.
const std::set<std::string, std::less<>> kSameAsChat = {
    "model", "temperature", "top_p", "stream", "parallel_tool_calls", "user", "metadata", "store", "service_tier",
    "prompt_cache_key", "safety_identifier", "seed", "top_k", "min_p", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "logit_bias", "stop", "ignore_eos", "min_tokens", "chat_template_kwargs"};

}  // namespace

ResponsesRequest parse_responses_request(const Json& body, const ImageBounds& images) {
  if (!body.is_object())
    throw ProtocolError(400, "The request body must be a JSON object.", "", "invalid_request_error", kInvalidType);
  Json chat = Json::object();
  for (const auto& [key, value] : body.items()) {
    if (kSameAsChat.contains(key)) {
      chat[key] = value;
    } else if (key == "input" || key == "instructions" || key == "tools" || key == "tool_choice" || key == "text" ||
               key == "reasoning" || key == "max_output_tokens" || key == "include" || key == "truncation" ||
               key == "stream_options") {
      // translated below
    } else if (key == "previous_response_id" || key == "conversation" || key == "prompt") {
      if (!value.is_null())
        reject(key, kUnsupportedValue,
               fmt::format("Unsupported parameter: '{}': this server stores no responses or conversations; send the "
                           "whole conversation in 'input'.", key));
    } else if (key == "background") {
      if (!value.is_null() && value != false) reject(key, kUnsupportedValue, "Unsupported value for 'background': responses run in the foreground.");
    } else if (key == "client_metadata") {
      // Codex's thread and turn ids: bookkeeping, recorded below.
    } else if (key == "max_tool_calls" || key == "top_logprobs") {
      if (!value.is_null()) reject(key, kUnsupportedValue, fmt::format("Unsupported parameter: '{}' is not supported by this server.", key));
    } else {
      reject(key, kUnknown, fmt::format("Unrecognized request argument supplied: {}", key));
    }
  }
  ResponsesRequest r;
  chat["messages"] = messages_of(body);
  Json offered = Json::array();
  if (const Json* v = member(body, "tools")) chat["tools"] = tools_of(*v, r.namespace_of, offered);
  if (const Json* v = member(body, "tool_choice")) chat["tool_choice"] = tool_choice_of(*v);
  if (const Json* v = member(body, "text")) {
    chat["response_format"] = response_format_of(*v);
    if (const Json* verbosity = member(*v, "verbosity")) chat["verbosity"] = *verbosity;  // chat's policy applies
  }
  if (const Json* v = member(body, "max_output_tokens")) chat["max_completion_tokens"] = *v;
  std::string summary;  // reasoning.summary: the reasoning comes back whole, in reasoning_text
  if (const Json* v = member(body, "reasoning")) {
    for (const auto& [key, value] : as_object(*v, "reasoning").items()) {
      if (key == "effort") {
        if (!value.is_null()) chat["reasoning_effort"] = value;
      } else if (key == "summary" || key == "generate_summary") {
        if (!value.is_null()) summary = as_string(value, path("reasoning", key));
      } else {
        reject(path("reasoning", key), kUnknown, fmt::format("Unrecognized request argument supplied: reasoning.{}", key));
      }
    }
  }
  if (const Json* v = member(body, "include")) {
    for (size_t i = 0; i < as_array(*v, "include").size(); ++i) {
      if ((*v)[i] != "reasoning.encrypted_content")
        reject(path("include", i), kUnsupportedValue,
               fmt::format("Unsupported value for '{}': {}; this server includes nothing but reasoning.encrypted_content.",
                           path("include", i), (*v)[i].dump()));
      r.encrypted_reasoning = true;
    }
  }
  if (const Json* v = member(body, "truncation"); v && *v != "disabled")
    reject("truncation", kUnsupportedValue,
           "Unsupported value for 'truncation': only 'disabled'; a prompt over the context is refused, not cut.");
  if (const Json* v = member(body, "stream_options")) as_object(*v, "stream_options");  // include_obfuscation: no-op

  try {
    r.chat = parse_chat_request(chat, images, /*tool_result_images=*/true);
  } catch (const ProtocolError& e) {
    throw responses_error(e);
  }
  if (const Json* v = member(body, "client_metadata")) {
    for (const auto& [key, value] : as_object(*v, "client_metadata").items())
      if (!value.is_null()) r.chat.client_attributes.emplace_back("client_metadata." + key, as_string(value, path("client_metadata", key)));
  }
  if (!summary.empty()) r.chat.client_attributes.emplace_back("reasoning.summary", summary);
  if (const Json* v = member(body, "tools"); v && offered.size() < v->size())
    r.chat.client_attributes.emplace_back("hosted_tools_not_offered", std::to_string(v->size() - offered.size()));
  auto echo = [&](const char* key, Json fallback) {
    const Json* v = member(body, key);
    r.echo[key] = v ? *v : std::move(fallback);
  };
  echo("instructions", nullptr);
  echo("max_output_tokens", nullptr);
  echo("metadata", Json::object());
  echo("parallel_tool_calls", true);
  r.echo["reasoning"] = {{"effort", r.chat.reasoning_effort ? Json(*r.chat.reasoning_effort) : Json(nullptr)}, {"summary", nullptr}};
  echo("temperature", 1.0);
  echo("text", {{"format", {{"type", "text"}}}});
  echo("tool_choice", "auto");
  r.echo["tools"] = std::move(offered);
  echo("top_p", 1.0);
  r.echo["truncation"] = "disabled";
  echo("user", nullptr);
  return r;
}

ProtocolError responses_error(const ProtocolError& e) {
  std::string param = e.param(), message = e.message();
  auto rename = [&](const std::string& from, const std::string& to) { return rename_field(param, message, from, to); };
  // Longest chat spelling first: "response_format.json_schema" before "response_format".
  rename("max_completion_tokens", "max_output_tokens") || rename("reasoning_effort", "reasoning.effort") ||
      rename("response_format.json_schema", "text.format") || rename("response_format", "text.format") ||
      rename("tool_choice.function", "tool_choice") || rename("verbosity", "text.verbosity");
  if (param.rfind("tools[", 0) == 0) {  // tools[i].function.x is tools[i].x
    if (const size_t f = param.find("].function"); f != std::string::npos) rename(param.substr(0, f + 10), param.substr(0, f + 1));
  }
  // The chat messages do not line up with the input items (instructions come first, function calls
  // join one turn): the error names the input as a whole and says which message it found it in.
  if (param.rfind("messages", 0) == 0) {
    if (param != "messages") message = fmt::format("In 'input' ({} of the chat messages it becomes): {}", param, message);
    param = "input";
  }
  return ProtocolError(e.status(), std::move(message), std::move(param), e.type(), e.code());
}

}  // namespace rocket
