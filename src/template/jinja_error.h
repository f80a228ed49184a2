// Errors of the chat-template engine (jinja_*.h).
//
// Helpers below the interpreter (values, filters, string methods) do not know which template line they
// serve, so they throw RenderError; the interpreter catches it at the statement being executed and
// rethrows a rocket::Error that names the line. Compile-time refusals are rocket::Errors directly.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace rocket::jinja {

class RenderError : public std::runtime_error {
 public:
  explicit RenderError(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
[[noreturn]] void render_fail(fmt::format_string<Args...> format, Args&&... args) {
  throw RenderError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace rocket::jinja
