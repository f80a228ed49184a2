// Two error channels (STYLE.md):
//  - Error: a recoverable problem with user input (checkpoint, config, plan, request). Thrown at the
//    point of detection with a message naming the file/tensor/field and expected vs found; caught at
//    the CLI or API boundary and shown to the user. Exceptions rather than Status values because the
//    parse paths are deep and every layer would otherwise forward the same value unchanged.
//  - CHECK: a programming error. Aborts with file and line.
#pragma once

#include <cstdio>
#include <cstdlib>
#ifndef __CUDACC__
#include <fmt/format.h>
#endif
#include <source_location>
#include <stdexcept>
#include <string>

namespace rocket {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// NOTE: not in CUDA translation units: nvcc cannot evaluate fmt 9's consteval format checks. Host
// code in .cu files throws Error with a composed std::string instead.
#ifndef __CUDACC__
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> fmt, Args&&... args) {
  throw Error(fmt::format(fmt, std::forward<Args>(args)...));
}
#endif

inline void check_impl(bool cond, const char* expr, const std::string& msg,
                       std::source_location loc = std::source_location::current()) {
  if (cond) return;
  std::fprintf(stderr, "CHECK failed at %s:%u: %s %s\n", loc.file_name(), loc.line(), expr, msg.c_str());
  std::abort();
}

}  // namespace rocket

#define CHECK(cond, ...) ::rocket::check_impl(static_cast<bool>(cond), #cond, std::string{__VA_ARGS__})
