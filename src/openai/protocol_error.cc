#include "openai/protocol_error.h"

namespace rocket {

ProtocolError::ProtocolError(int status, std::string message, std::string param, std::string type,
                             std::string code)
    : Error(message),
      status_(status),
      message_(std::move(message)),
      param_(std::move(param)),
      type_(std::move(type)),
      code_(std::move(code)) {}

nlohmann::ordered_json error_body(const ProtocolError& error) {
  auto null_if_empty = [](const std::string& s) { return s.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s); };
  return {{"error",
           {{"message", error.message()},
            {"type", error.type()},
            {"param", null_if_empty(error.param())},
            {"code", null_if_empty(error.code())}}}};
}

}  // namespace rocket
