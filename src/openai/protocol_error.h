// A request the server refuses, in OpenAI's error shape. Thrown by the request parsers (and by the
// server for 401/404/503), caught at the HTTP boundary, and written with error_body() under `status`.
//
// It derives from Error so that any boundary that only knows Error still shows the message; the
// HTTP layer catches ProtocolError first to keep the status and the named field.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace rocket {

class ProtocolError : public Error {
 public:
  // `param` names the offending field as a path ("messages[2].content[0].type"); empty = the request
  // as a whole. `code` is OpenAI's machine-readable reason ("invalid_type"); empty = none.
  ProtocolError(int status, std::string message, std::string param = "",
                std::string type = "invalid_request_error", std::string code = "");

  int status() const { return status_; }
  const std::string& message() const { return message_; }
  const std::string& param() const { return param_; }
  const std::string& type() const { return type_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string message_;
  std::string param_;
  std::string type_;
  std::string code_;
};

// {"error": {"message", "type", "param", "code"}}; param and code are null when empty, as OpenAI
// writes them.
nlohmann::ordered_json error_body(const ProtocolError& error);

}  // namespace rocket
