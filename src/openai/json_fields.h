// Reading a client's JSON body field by field, each refusal a ProtocolError (400) that names the
// field's path ("input[2].content[0].type"): what the translators of other APIs' bodies into chat
// requests (openai/responses_request.h, anthropic/messages_request.h) check before the chat parser.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "openai/protocol_error.h"

namespace rocket::json_fields {

using Json = nlohmann::ordered_json;

[[noreturn]] inline void refuse(const std::string& param, const char* code, const std::string& message) {
  throw ProtocolError(400, message, param, "invalid_request_error", code);
}

inline std::string at(const std::string& parent, size_t i) { return fmt::format("{}[{}]", parent, i); }
inline std::string dot(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

// Null means "not given", as in OpenAI's and Anthropic's schemas.
inline const Json* member(const Json& object, const std::string& key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

inline const Json& required(const Json& object, const std::string& key, const std::string& param) {
  const Json* v = member(object, key);
  if (!v)
    throw ProtocolError(400, fmt::format("Missing required parameter: '{}'.", param), param, "invalid_request_error",
                        "missing_required_parameter");
  return *v;
}

inline const Json& object_at(const Json& v, const std::string& param) {
  if (!v.is_object()) refuse(param, "invalid_type", fmt::format("Invalid type for '{}': expected an object.", param));
  return v;
}

inline const Json& array_at(const Json& v, const std::string& param) {
  if (!v.is_array()) refuse(param, "invalid_type", fmt::format("Invalid type for '{}': expected an array.", param));
  return v;
}

inline std::string string_at(const Json& object, const std::string& key, const std::string& param) {
  const Json& v = required(object, key, param);
  if (!v.is_string()) refuse(param, "invalid_type", fmt::format("Invalid type for '{}': expected a string.", param));
  return v.get<std::string>();
}

// An error about the chat request a body was translated into, as the body spells the field: when
// `param` starts with `from`, that prefix becomes `to`, in `message` too. Returns whether it did.
inline bool rename_field(std::string& param, std::string& message, const std::string& from, const std::string& to) {
  if (param.rfind(from, 0) != 0) return false;
  param.replace(0, from.size(), to);
  for (size_t i = message.find(from); i != std::string::npos; i = message.find(from, i + to.size()))
    message.replace(i, from.size(), to);
  return true;
}

}  // namespace rocket::json_fields
