// SchemaError: a schema (or grammar) the compiler refuses, with the JSON path of the part at fault
// ("$.properties.tags.items"), so the server's 400 can say which keyword of which subschema.
#pragma once

#include <stdexcept>
#include <string>

namespace rocket::grammar {

class SchemaError : public std::runtime_error {
 public:
  SchemaError(std::string path, const std::string& message)
      : std::runtime_error(path + ": " + message), path_(std::move(path)), message_(message) {}
  const std::string& path() const { return path_; }
  const std::string& message() const { return message_; }

 private:
  std::string path_, message_;
};

}  // namespace rocket::grammar
