#include "openai/openai_request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "openai/json_fields.h"

namespace rocket {

using namespace json_fields;

namespace {

// Parses client JSON text; discarded when malformed. The callback sees a container's start with
// `depth` = the containers already open around it and throws before the container is built, so a
// hostile text costs no more than its first max_depth levels.
Json parse_bounded(std::string_view text, int max_depth) {
  const auto bounded = [max_depth](int depth, Json::parse_event_t event, Json&) {
    const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    if (opens && depth + 1 > max_depth)
      throw ProtocolError(400, fmt::format("The JSON of your request nests deeper than {} levels, this server's limit.",
                                           max_depth), "", "invalid_request_error", "json_too_deep");
    return true;
  };
  return Json::parse(text, bounded, /*allow_exceptions=*/false);
}

[[noreturn]] void unsupported(const std::string& param, std::string_view why) {
  reject(param, kUnsupportedParameter, fmt::format("Unsupported parameter '{}': {}", param, why));
}

[[noreturn]] void unsupported_value(const std::string& param, std::string_view why) {
  reject(param, kUnsupportedValue, fmt::format("Unsupported value for '{}': {}", param, why));
}

// Integers in [lo, hi]. A decimal with an integral value (100.0) is taken: some JSON writers emit
// every number that way.
int64_t as_integer(const Json& v, const std::string& param, int64_t lo, int64_t hi) {
  int64_t x;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    x = u > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max() : int64_t(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>() &&
             std::abs(v.get<double>()) < 9.0e18) {
    x = int64_t(v.get<double>());
  } else {
    wrong_type(param, "an integer", v);
  }
  if (x < lo || x > hi) {
    reject(param, kInvalidValue,
           hi == std::numeric_limits<int64_t>::max()
               ? fmt::format("Invalid value for '{}': {} is below the minimum of {}.", param, x, lo)
               : fmt::format("Invalid value for '{}': expected an integer in [{}, {}], got {}.", param, lo, hi, x));
  }
  return x;
}

double as_number(const Json& v, const std::string& param, double lo, double hi, bool lo_open = false) {
  if (!v.is_number()) wrong_type(param, "a decimal", v);
  const double x = v.get<double>();
  if (!(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
    reject(param, kInvalidValue,
           fmt::format("Invalid value for '{}': expected a number in {}{}, {}], got {}.", param, lo_open ? "(" : "[",
                       lo, hi, x));
  }
  return x;
}

constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------------------------------------------
// Fields every endpoint shares

void reject_unknown_fields(const Json& body, const std::set<std::string, std::less<>>& known) {
  for (const auto& [key, value] : body.items()) {
    if (!known.contains(key)) {
      reject(key, kUnknown, fmt::format("Unrecognized request argument supplied: {}", key));
    }
  }
}

// {"token id": bias}: token ids as decimal strings (OpenAI's form), at most kMaxLogitBias of them.
std::vector<LogitBias> parse_logit_bias(const Json& v) {
  as_object(v, "logit_bias");
  if (v.size() > size_t(kMaxLogitBias))
    reject("logit_bias", kInvalidValue,
           fmt::format("Invalid value for 'logit_bias': at most {} tokens, got {}.", kMaxLogitBias, v.size()));
  std::vector<LogitBias> out;
  for (const auto& [key, bias] : v.items()) {
    const std::string param = path("logit_bias", key);
    const bool digits = !key.empty() && key.size() <= 10 && std::all_of(key.begin(), key.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    if (!digits || std::stoll(key) > std::numeric_limits<int32_t>::max())
      reject(param, kInvalidValue,
             fmt::format("Invalid value for 'logit_bias': the key '{}' is not a token id (a non-negative integer).", key));
    out.push_back({.token = int32_t(std::stoll(key)), .bias = float(as_number(bias, param, -100.0, 100.0))});
  }
  std::sort(out.begin(), out.end(), [](const LogitBias& a, const LogitBias& b) { return a.token < b.token; });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].token == out[i - 1].token)
      reject("logit_bias", kInvalidValue,
             fmt::format("Invalid value for 'logit_bias': token {} appears twice.", out[i].token));
  return out;
}

void parse_sampling(const Json& body, CompletionRequest& r) {
  r.model = as_string(required(body, "model", "model"), "model");
  if (const Json* v = member(body, "temperature")) r.temperature = as_number(*v, "temperature", 0.0, 2.0);
  if (const Json* v = member(body, "top_p")) r.top_p = as_number(*v, "top_p", 0.0, 1.0, /*lo_open=*/true);
  if (const Json* v = member(body, "top_k")) {
    const int64_t k = as_integer(*v, "top_k", -1, std::numeric_limits<int32_t>::max());
    r.top_k = k < 0 ? 0 : int(k);  // vLLM's -1 for "off"
  }
  if (const Json* v = member(body, "seed")) r.seed = as_integer(*v, "seed", std::numeric_limits<int64_t>::min(), kMaxInt);
  if (const Json* v = member(body, "stop")) {
    if (v->is_string()) {
      r.stop = {v->get<std::string>()};
    } else if (v->is_array()) {
      if (v->size() > 4) {
        reject("stop", kInvalidValue, fmt::format("Invalid value for 'stop': at most 4 stop sequences, got {}.", v->size()));
      }
      for (size_t i = 0; i < v->size(); ++i) r.stop.push_back(as_string((*v)[i], path("stop", i)));
    } else {
      wrong_type("stop", "a string or an array of strings", *v);
    }
    for (const std::string& s : r.stop) {
      if (s.empty()) reject("stop", kInvalidValue, "Invalid value for 'stop': stop sequences must not be empty.");
    }
  }
  if (const Json* v = member(body, "stream")) r.stream = as_bool(*v, "stream");
  if (const Json* v = member(body, "stream_options")) {
    as_object(*v, "stream_options");
    if (!r.stream) {
      reject("stream_options", kInvalidValue, "Invalid value for 'stream_options': only allowed when 'stream' is true.");
    }
    for (const auto& [key, value] : v->items()) {
      const std::string param = path("stream_options", key);
      if (key != "include_usage") reject(param, kUnknown, fmt::format("Unrecognized request argument supplied: {}", param));
      if (!value.is_null()) r.include_usage = as_bool(value, param);
    }
  }
  if (const Json* v = member(body, "n")) r.n = as_integer(*v, "n", 1, kMaxInt);
  if (const Json* v = member(body, "min_p")) r.min_p = as_number(*v, "min_p", 0.0, 1.0);
  if (const Json* v = member(body, "presence_penalty")) r.presence_penalty = as_number(*v, "presence_penalty", -2.0, 2.0);
  if (const Json* v = member(body, "frequency_penalty")) r.frequency_penalty = as_number(*v, "frequency_penalty", -2.0, 2.0);
  if (const Json* v = member(body, "repetition_penalty"))
    r.repetition_penalty = as_number(*v, "repetition_penalty", 0.0, 1.0e6, /*lo_open=*/true);
  if (const Json* v = member(body, "logit_bias")) r.logit_bias = parse_logit_bias(*v);
  if (const Json* v = member(body, "ignore_eos")) r.ignore_eos = as_bool(*v, "ignore_eos");
  if (const Json* v = member(body, "min_tokens")) r.min_tokens = as_integer(*v, "min_tokens", 0, kMaxInt);
  if (const Json* v = member(body, "user")) r.user = as_string(*v, "user");
  if (const Json* v = member(body, "speculative")) r.speculative = as_bool(*v, "speculative");
}

// ---------------------------------------------------------------------------------------------------
// Chat

// Where a message's images go while parsing: the request's list, under the server's bounds.
struct ImageSink {
  std::vector<ImageInput>& images;
  const ImageBounds& bounds;
  bool tool_images = false;  // a tool message may hold images (translated Responses and Messages tool results)
};

// An image_url part's image ({"type": "image_url", "image_url": {"url", "detail"}}, OpenAI's shape):
// appended to the request's images, its index returned.
int image_part(const Json& part, const std::string& param, ImageSink& sink) {
  const std::string p = path(param, "image_url");
  const Json& image_url = as_object(required(part, "image_url", p), p);
  for (const auto& [key, value] : image_url.items())
    if (key != "url" && key != "detail")
      reject(path(p, key), kUnknown, fmt::format("Unrecognized request argument supplied: {}", path(p, key)));
  // detail picks OpenAI's resolution; Qwen's processor has one rule (the plan's pixel bounds), so it
  // is checked and changes nothing.
  if (const Json* d = member(image_url, "detail")) {
    const std::string detail = as_string(*d, path(p, "detail"));
    if (detail != "auto" && detail != "low" && detail != "high")
      reject(path(p, "detail"), kInvalidValue,
             fmt::format("Invalid value for '{}': '{}' is not one of auto, low, high.", path(p, "detail"), detail));
  }
  const std::string url = as_string(required(image_url, "url", path(p, "url")), path(p, "url"));
  if (sink.images.size() >= size_t(sink.bounds.max_images))
    reject(param, kInvalidValue,
           fmt::format("Invalid value for '{}': this server takes at most {} images per request.", param,
                       sink.bounds.max_images));
  sink.images.push_back(image_from_url(url, param, sink.bounds));
  return int(sink.images.size() - 1);
}

// A message's content: its text (text parts joined with '\n', as vLLM joins them) and, where it has
// image parts (a user message; a tool message where the sink allows it), every part in order.
std::string parse_content(const Json& v, const std::string& param, ChatMessage& m, ImageSink& sink) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) wrong_type(param, "a string or an array of content parts", v);
  std::string text;
  std::vector<ChatMessage::Part> parts;
  bool images = false, texts = false;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string part_param = path(param, i);
    const Json& part = as_object(v[i], part_param);
    const std::string type = as_string(required(part, "type", path(part_param, "type")), path(part_param, "type"));
    if (type == "image_url") {
      // OpenAI's tool message content is text parts only (ChatCompletionToolMessageParam); the Responses
      // and Messages tool results that reach chat as tool messages may hold images, and the template
      // places them inside the tool response.
      if (m.role == "tool" && !sink.tool_images)
        unsupported_value(path(part_param, "type"),
                          "a tool message's content is text parts only in Chat Completions (OpenAI's "
                          "ChatCompletionToolMessageParam); send the image in a user message after the tool message "
                          "(/v1/responses and /v1/messages take images in a tool result).");
      if (m.role != "user" && m.role != "tool")
        unsupported_value(path(part_param, "type"),
                          fmt::format("image parts are accepted in user messages only, not in a '{}' message.", m.role));
      parts.push_back({.text = "", .image = image_part(part, part_param, sink)});
      images = true;
      continue;
    }
    if (type != "text") {
      unsupported_value(path(part_param, "type"),
                        fmt::format("content parts of type '{}' are not supported; this engine reads text and "
                                    "image_url parts.", type));
    }
    const std::string t = as_string(required(part, "text", path(part_param, "text")), path(part_param, "text"));
    if (texts) text += '\n';
    texts = true;
    text += t;
    parts.push_back({.text = t});
  }
  if (images) m.parts = std::move(parts);
  return text;
}

ToolCall history_tool_call(const Json& v, const std::string& param) {
  as_object(v, param);
  ToolCall call;
  call.id = as_string(required(v, "id", path(param, "id")), path(param, "id"));
  const std::string type = as_string(required(v, "type", path(param, "type")), path(param, "type"));
  if (type != "function") {
    unsupported_value(path(param, "type"), fmt::format("tool calls of type '{}' are not supported; only 'function'.", type));
  }
  const std::string fn = path(param, "function");
  const Json& function = as_object(required(v, "function", fn), fn);
  call.name = as_string(required(function, "name", path(fn, "name")), path(fn, "name"));
  const Json& arguments = required(function, "arguments", path(fn, "arguments"));
  // OpenAI carries arguments as a JSON string; an object (some clients send one) is taken as its text.
  // Templates iterate the arguments as a mapping (Qwen3.5: `tool_call.arguments|items`), so the text
  // must be an object; an empty string (some clients' no-argument call) is {}.
  if (arguments.is_object()) {
    call.arguments = arguments.dump();
  } else {
    call.arguments = as_string(arguments, path(fn, "arguments"));
    if (call.arguments.find_first_not_of(" \t\r\n") == std::string::npos) call.arguments = "{}";
    // The text is client JSON inside JSON: bounded like the body, for the template's walks over it.
    const Json parsed = parse_bounded(call.arguments, kDefaultMaxJsonDepth);
    if (parsed.is_discarded() || !parsed.is_object())
      reject(path(fn, "arguments"), kInvalidValue,
             fmt::format("Invalid value for '{}': the arguments must be a JSON object (as text), got {}.", path(fn, "arguments"),
                         parsed.is_discarded() ? "text that is not JSON" : kind_of(parsed)));
  }
  return call;
}

ChatMessage parse_message(const Json& v, const std::string& param, ImageSink& images) {
  as_object(v, param);
  ChatMessage m;
  m.role = as_string(required(v, "role", path(param, "role")), path(param, "role"));
  static const std::set<std::string, std::less<>> kRoles = {"system", "developer", "user", "assistant", "tool"};
  if (!kRoles.contains(m.role)) {
    reject(path(param, "role"), kInvalidValue,
           fmt::format("Invalid value for '{}': '{}' is not one of system, developer, user, assistant, tool.",
                       path(param, "role"), m.role));
  }
  if (const Json* name = member(v, "name")) m.name = as_string(*name, path(param, "name"));
  if (m.role == "assistant") {
    if (const Json* calls = member(v, "tool_calls")) {
      const std::string calls_param = path(param, "tool_calls");
      as_array(*calls, calls_param);
      for (size_t i = 0; i < calls->size(); ++i) m.tool_calls.push_back(history_tool_call((*calls)[i], path(calls_param, i)));
    }
    if (const Json* reasoning = member(v, "reasoning_content")) {
      m.reasoning_content = as_string(*reasoning, path(param, "reasoning_content"));
    }
  }
  if (m.role == "tool") {
    m.tool_call_id = as_string(required(v, "tool_call_id", path(param, "tool_call_id")), path(param, "tool_call_id"));
  }
  const std::string content_param = path(param, "content");
  if (const Json* content = member(v, "content")) {
    m.content = parse_content(*content, content_param, m, images);
  } else if (m.role != "assistant" || m.tool_calls.empty()) {
    // OpenAI: content is required unless the assistant makes tool calls.
    reject(content_param, kMissing, fmt::format("Missing required parameter: '{}'.", content_param));
  }
  // Other members (refusal, annotations, audio: what a client echoes back from a response) do not
  // reach the prompt and are ignored.
  return m;
}

Tool parse_tool(const Json& v, const std::string& param) {
  as_object(v, param);
  const std::string type = as_string(required(v, "type", path(param, "type")), path(param, "type"));
  if (type != "function") {
    unsupported_value(path(param, "type"), fmt::format("tools of type '{}' are not supported; only 'function'.", type));
  }
  const std::string fn = path(param, "function");
  const Json& function = as_object(required(v, "function", fn), fn);
  Tool tool;
  tool.name = as_string(required(function, "name", path(fn, "name")), path(fn, "name"));
  // OpenAI's rule for function names: ^[a-zA-Z0-9_-]{1,64}$.
  const bool name_ok = !tool.name.empty() && tool.name.size() <= 64 &&
                       std::all_of(tool.name.begin(), tool.name.end(),
                                   [](char c) { return std::isalnum(uint8_t(c)) || c == '_' || c == '-'; });
  if (!name_ok) {
    reject(path(fn, "name"), kInvalidValue,
           fmt::format("Invalid value for '{}': '{}' must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'.", path(fn, "name"),
                       tool.name));
  }
  if (const Json* d = member(function, "description")) tool.description = as_string(*d, path(fn, "description"));
  if (const Json* p = member(function, "parameters")) tool.parameters = as_object(*p, path(fn, "parameters"));
  if (const Json* s = member(function, "strict")) tool.strict = as_bool(*s, path(fn, "strict"));
  return tool;
}

ToolChoice parse_tool_choice(const Json& v, const std::vector<Tool>& tools) {
  ToolChoice choice;
  if (v.is_string()) {
    const std::string mode = v.get<std::string>();
    if (mode == "auto") {
      choice.mode = ToolChoice::Mode::kAuto;
    } else if (mode == "none") {
      choice.mode = ToolChoice::Mode::kNone;
    } else if (mode == "required") {
      choice.mode = ToolChoice::Mode::kRequired;
    } else {
      reject("tool_choice", kInvalidValue,
             fmt::format("Invalid value for 'tool_choice': '{}' is not one of auto, none, required.", mode));
    }
  } else if (v.is_object()) {
    const std::string type = as_string(required(v, "type", "tool_choice.type"), "tool_choice.type");
    if (type != "function") {
      unsupported_value("tool_choice.type", fmt::format("'{}' is not supported; only 'function'.", type));
    }
    const Json& function = as_object(required(v, "function", "tool_choice.function"), "tool_choice.function");
    choice.mode = ToolChoice::Mode::kFunction;
    choice.function = as_string(required(function, "name", "tool_choice.function.name"), "tool_choice.function.name");
    const bool known = std::any_of(tools.begin(), tools.end(), [&](const Tool& t) { return t.name == choice.function; });
    if (!known) {
      reject("tool_choice.function.name", kInvalidValue,
             fmt::format("Invalid value for 'tool_choice.function.name': no tool named '{}' in 'tools'.", choice.function));
    }
  } else {
    wrong_type("tool_choice", "a string or an object", v);
  }
  if (choice.mode == ToolChoice::Mode::kRequired && tools.empty()) {
    reject("tool_choice", kInvalidValue, "Invalid value for 'tool_choice': 'required' needs 'tools'.");
  }
  return choice;
}

void parse_tools(const Json& body, CompletionRequest& r) {
  if (const Json* v = member(body, "tools")) {
    as_array(*v, "tools");
    if (v->size() > 128) {
      reject("tools", kInvalidValue, fmt::format("Invalid value for 'tools': at most 128 tools, got {}.", v->size()));
    }
    std::set<std::string, std::less<>> names;
    for (size_t i = 0; i < v->size(); ++i) {
      r.tools.push_back(parse_tool((*v)[i], path("tools", i)));
      if (!names.insert(r.tools.back().name).second) {
        const std::string param = path(path("tools", i), "function.name");
        reject(param, kInvalidValue, fmt::format("Invalid value for '{}': a second tool named '{}'.", param, r.tools.back().name));
      }
    }
  }
  if (const Json* v = member(body, "tool_choice")) r.tool_choice = parse_tool_choice(*v, r.tools);
  if (const Json* v = member(body, "parallel_tool_calls")) r.parallel_tool_calls = as_bool(*v, "parallel_tool_calls");
}

ResponseFormat parse_response_format(const Json& v) {
  const Json& format = as_object(v, "response_format");
  const std::string type = as_string(required(format, "type", "response_format.type"), "response_format.type");
  ResponseFormat out;
  auto only = [&](const Json& object, const std::string& param, std::initializer_list<const char*> keys) {
    for (const auto& [key, value] : object.items())
      if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; }))
        reject(path(param, key), kUnknown, fmt::format("Unrecognized request argument supplied: {}", path(param, key)));
  };
  if (type == "text") {
    only(format, "response_format", {"type"});
    return out;
  }
  if (type == "json_object") {
    only(format, "response_format", {"type"});
    out.kind = ResponseFormat::Kind::kJsonObject;
    return out;
  }
  if (type != "json_schema")
    reject("response_format.type", kInvalidValue,
           fmt::format("Invalid value for 'response_format.type': '{}'; expected text, json_object or json_schema.", type));
  only(format, "response_format", {"type", "json_schema"});
  const std::string param = "response_format.json_schema";
  const Json& js = as_object(required(format, "json_schema", param), param);
  only(js, param, {"name", "schema", "strict", "description"});
  out.kind = ResponseFormat::Kind::kJsonSchema;
  out.name = as_string(required(js, "name", path(param, "name")), path(param, "name"));
  const bool name_ok = !out.name.empty() && out.name.size() <= 64 && std::all_of(out.name.begin(), out.name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  if (!name_ok)
    reject(path(param, "name"), kInvalidValue,
           fmt::format("Invalid value for '{}.name': 1 to 64 of a-z, A-Z, 0-9, _ and -.", param));
  if (const Json* d = member(js, "description")) as_string(*d, path(param, "description"));
  // strict or not, the output follows the schema: there is no weaker mode to fall back to.
  if (const Json* st = member(js, "strict")) as_bool(*st, path(param, "strict"));
  out.schema = Json::object();
  if (const Json* sc = member(js, "schema")) {
    if (!sc->is_object() && !sc->is_boolean()) wrong_type(path(param, "schema"), "an object", *sc);
    out.schema = *sc;
  }
  try {
    grammar::compile_schema(out.schema);
  } catch (const grammar::SchemaError& e) {
    unsupported_value(path(param, "schema"), fmt::format("at {}: {}.", e.path(), e.message()));
  }
  return out;
}

// Fields that would change the output and that this engine cannot honour beyond a neutral value.
void reject_chat_extras(const Json& body) {
  if (const Json* v = member(body, "modalities")) {
    as_array(*v, "modalities");
    for (size_t i = 0; i < v->size(); ++i) {
      if (as_string((*v)[i], path("modalities", i)) != "text") unsupported_value("modalities", "only [\"text\"].");
    }
  }
  static const std::pair<const char*, const char*> kUnsupported[] = {
      {"audio", "this engine produces text only."},
      {"prediction", "predicted outputs are not supported."},
      {"web_search_options", "this engine has no web search."},
      {"verbosity", "not supported by this model."},
      {"functions", "deprecated by OpenAI; use 'tools'."},
      {"function_call", "deprecated by OpenAI; use 'tool_choice'."},
  };
  for (const auto& [name, why] : kUnsupported) {
    if (member(body, name)) unsupported(name, why);
  }
}

// Fields that cannot change the output: checked for type, then recorded on the request's span.
void check_bookkeeping(const Json& body, CompletionRequest& r) {
  if (const Json* v = member(body, "store")) r.client_attributes.emplace_back("store", as_bool(*v, "store") ? "true" : "false");
  if (const Json* v = member(body, "metadata")) {
    as_object(*v, "metadata");
    for (const auto& [key, value] : v->items())
      r.client_attributes.emplace_back("metadata." + key, as_string(value, path("metadata", key)));
  }
  for (const char* name : {"service_tier", "prompt_cache_key", "safety_identifier"}) {
    if (const Json* v = member(body, name)) r.client_attributes.emplace_back(name, as_string(*v, name));
  }
}

// ---------------------------------------------------------------------------------------------------
// Completions

std::vector<int32_t> token_ids(const Json& v, const std::string& param) {
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ids.push_back(int32_t(as_integer(v[i], path(param, i), 0, std::numeric_limits<int32_t>::max())));
  }
  return ids;
}

std::variant<std::string, std::vector<int32_t>> parse_prompt(const Json& v) {
  const char* kBatch = "one prompt per request; batched prompts are not supported.";
  std::variant<std::string, std::vector<int32_t>> prompt;
  if (v.is_string()) {
    prompt = v.get<std::string>();
  } else if (v.is_array() && !v.empty() && v[0].is_string()) {
    if (v.size() != 1) unsupported_value("prompt", kBatch);
    prompt = v[0].get<std::string>();
  } else if (v.is_array() && !v.empty() && v[0].is_array()) {
    if (v.size() != 1) unsupported_value("prompt", kBatch);
    prompt = token_ids(v[0], "prompt[0]");
  } else if (v.is_array()) {
    prompt = token_ids(v, "prompt");
  } else {
    wrong_type("prompt", "a string, an array of token ids, or an array of one of either", v);
  }
  const bool empty = std::visit([](const auto& p) { return p.empty(); }, prompt);
  if (empty) reject("prompt", kInvalidValue, "Invalid value for 'prompt': the prompt is empty.");
  return prompt;
}

}  // namespace

nlohmann::ordered_json parse_json_body(std::string_view body, int max_depth) {
  Json doc = parse_bounded(body, max_depth);
  if (doc.is_discarded()) {
    throw ProtocolError(400, "We could not parse the JSON body of your request: it is not valid JSON.", "",
                        "invalid_request_error", "invalid_json");
  }
  if (!doc.is_object()) {
    throw ProtocolError(400, fmt::format("The request body must be a JSON object, got {}.", kind_of(doc)), "",
                        "invalid_request_error", kInvalidType);
  }
  return doc;
}

CompletionRequest parse_chat_request(const nlohmann::ordered_json& body, const ImageBounds& image_bounds,
                                     bool tool_result_images) {
  if (!body.is_object()) throw ProtocolError(400, "The request body must be a JSON object.", "", "invalid_request_error", kInvalidType);
  static const std::set<std::string, std::less<>> kKnown = {
      "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "stop",
      "stream", "stream_options", "logprobs", "top_logprobs", "n", "tools", "tool_choice", "parallel_tool_calls",
      "user", "chat_template_kwargs", "frequency_penalty", "presence_penalty", "repetition_penalty", "min_p",
      "ignore_eos", "min_tokens", "logit_bias", "response_format", "speculative",
      "modalities", "audio", "prediction", "web_search_options", "reasoning_effort", "verbosity", "functions",
      "function_call", "store", "metadata", "service_tier", "prompt_cache_key", "safety_identifier"};
  reject_unknown_fields(body, kKnown);

  CompletionRequest r;
  r.kind = CompletionRequest::Kind::kChat;
  parse_sampling(body, r);
  const Json& messages = as_array(required(body, "messages", "messages"), "messages");
  if (messages.empty()) reject("messages", kInvalidValue, "Invalid value for 'messages': at least one message is needed.");
  ImageSink images{r.images, image_bounds, tool_result_images};
  for (size_t i = 0; i < messages.size(); ++i) r.messages.push_back(parse_message(messages[i], path("messages", i), images));

  if (const Json* v = member(body, "max_tokens")) r.max_tokens = as_integer(*v, "max_tokens", 1, kMaxInt);
  // max_completion_tokens is OpenAI's current name; it wins over the deprecated max_tokens.
  if (const Json* v = member(body, "max_completion_tokens")) {
    r.max_tokens = as_integer(*v, "max_completion_tokens", 1, kMaxInt);
  }
  if (const Json* v = member(body, "logprobs")) r.logprobs = as_bool(*v, "logprobs");
  if (const Json* v = member(body, "top_logprobs")) {
    r.top_logprobs = int(as_integer(*v, "top_logprobs", 0, 20));
    if (!r.logprobs) reject("top_logprobs", kInvalidValue, "Invalid value for 'top_logprobs': 'logprobs' must be true to use it.");
  }
  parse_tools(body, r);
  if (const Json* v = member(body, "chat_template_kwargs")) {
    as_object(*v, "chat_template_kwargs");
    // The variables the server sets itself are not the client's to replace.
    static const std::set<std::string, std::less<>> kServerVariables = {"messages", "tools", "add_generation_prompt",
                                                                      "bos_token", "eos_token", "reasoning_effort"};
    for (const auto& [key, value] : v->items()) {
      const std::string param = path("chat_template_kwargs", key);
      if (kServerVariables.contains(key))
        unsupported(param, key == "reasoning_effort" ? "send it as the request's reasoning_effort."
                                                     : "the server sets this template variable from the request.");
      if (value.is_null()) continue;
      if (key == "enable_thinking") r.enable_thinking = as_bool(value, param);
      r.template_kwargs[key] = value;
    }
  }
  if (const Json* v = member(body, "reasoning_effort")) {
    const std::string effort = as_string(*v, "reasoning_effort");
    static const std::set<std::string, std::less<>> kEfforts = {"none", "minimal", "low", "medium", "high"};
    if (!kEfforts.contains(effort))
      reject("reasoning_effort", kInvalidValue,
             fmt::format("Invalid value for 'reasoning_effort': '{}'; expected none, minimal, low, medium or high.", effort));
    r.reasoning_effort = effort;
  }
  if (const Json* v = member(body, "response_format")) r.response_format = parse_response_format(*v);
  const bool forced_call = r.tool_choice.mode == ToolChoice::Mode::kRequired || r.tool_choice.mode == ToolChoice::Mode::kFunction;
  if (forced_call && r.response_format.kind != ResponseFormat::Kind::kText)
    unsupported_value("response_format", "a forced tool call (tool_choice required or a named function) answers with a "
                                         "call, not in a response format; send one or the other.");
  reject_chat_extras(body);
  check_bookkeeping(body, r);
  return r;
}

CompletionRequest parse_completion_request(const nlohmann::ordered_json& body) {
  if (!body.is_object()) throw ProtocolError(400, "The request body must be a JSON object.", "", "invalid_request_error", kInvalidType);
  static const std::set<std::string, std::less<>> kKnown = {
      "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream", "stream_options",
      "logprobs", "n", "best_of", "echo", "suffix", "frequency_penalty", "presence_penalty", "repetition_penalty",
      "min_p", "ignore_eos", "min_tokens", "logit_bias", "user", "speculative"};
  reject_unknown_fields(body, kKnown);

  CompletionRequest r;
  r.kind = CompletionRequest::Kind::kCompletion;
  parse_sampling(body, r);
  r.prompt = parse_prompt(required(body, "prompt", "prompt"));
  r.max_tokens = 16;  // OpenAI's default for this endpoint
  if (const Json* v = member(body, "max_tokens")) r.max_tokens = as_integer(*v, "max_tokens", 1, kMaxInt);
  // Legacy completions take `logprobs` as the number of alternatives per token (at most 5).
  if (const Json* v = member(body, "logprobs")) {
    r.logprobs = true;
    r.top_logprobs = int(as_integer(*v, "logprobs", 0, 5));
  }
  if (const Json* v = member(body, "best_of")) {
    if (as_integer(*v, "best_of", 1, kMaxInt) != 1) {
      unsupported_value("best_of", "ranking several sequences (best_of) is not supported; it must be 1 (n gives several choices).");
    }
  }
  if (const Json* v = member(body, "echo")) {
    if (as_bool(*v, "echo")) unsupported_value("echo", "echoing the prompt is not supported.");
  }
  if (const Json* v = member(body, "suffix")) {
    if (!as_string(*v, "suffix").empty()) unsupported_value("suffix", "insertion (suffix) is not supported.");
  }
  return r;
}

}  // namespace rocket
