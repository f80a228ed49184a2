// The message of the rocket::Error `f` throws, or "" when it throws none: tests compare refusals by
// what they say.
#pragma once

#include <functional>
#include <string>

#include "core/error.h"

namespace rocket::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace rocket::test
