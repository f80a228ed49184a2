// Reading a client's JSON body field by field, each refusal a ProtocolError (400) that names the
// field's path ("input[2].content[0].type"): what the chat and completions parser
// (openai/openai_request.cc) and the translators of other APIs' bodies into chat requests
// (openai/responses_request.h, anthropic/messages_request.h) are written with.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "openai/protocol_error.h"

namespace rocket::json_fields {

using Json = nlohmann::ordered_json;

// OpenAI's error codes for the 400s.
inline constexpr const char* kInvalidType = "invalid_type";
inline constexpr const char* kInvalidValue = "invalid_value";
inline constexpr const char* kMissing = "missing_required_parameter";
inline constexpr const char* kUnknown = "unknown_parameter";
inline constexpr const char* kUnsupportedParameter = "unsupported_parameter";
inline constexpr const char* kUnsupportedValue = "unsupported_value";

[[noreturn]] inline void reject(const std::string& param, const char* code, std::string message) {
  throw ProtocolError(400, std::move(message), param, "invalid_request_error", code);
}

inline std::string_view kind_of(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a decimal";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

[[noreturn]] inline void wrong_type(const std::string& param, std::string_view expected, const Json& got) {
  reject(param, kInvalidType,
         fmt::format("Invalid type for '{}': expected {}, but got {} instead.", param, expected, kind_of(got)));
}

inline std::string path(const std::string& parent, std::string_view key) { return fmt::format("{}.{}", parent, key); }
inline std::string path(const std::string& parent, size_t index) { return fmt::format("{}[{}]", parent, index); }

// A member of an object; absent and null are both "not given", as in OpenAI's and Anthropic's schemas.
inline const Json* member(const Json& object, const std::string& key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

inline const Json& required(const Json& object, const std::string& key, const std::string& param) {
  const Json* v = member(object, key);
  if (!v) reject(param, kMissing, fmt::format("Missing required parameter: '{}'.", param));
  return *v;
}

inline std::string as_string(const Json& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, "a string", v);
  return v.get<std::string>();
}

inline bool as_bool(const Json& v, const std::string& param) {
  if (!v.is_boolean()) wrong_type(param, "a boolean", v);
  return v.get<bool>();
}

inline const Json& as_object(const Json& v, const std::string& param) {
  if (!v.is_object()) wrong_type(param, "an object", v);
  return v;
}

inline const Json& as_array(const Json& v, const std::string& param) {
  if (!v.is_array()) wrong_type(param, "an array", v);
  return v;
}

// A required string member: object[key], named `param`.
inline std::string string_at(const Json& object, const std::string& key, const std::string& param) {
  return as_string(required(object, key, param), param);
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
