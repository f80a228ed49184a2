// One word for `sh -c`: the text in single quotes, each quote inside closed, escaped and reopened, so
// a path with spaces or quotes reaches the program as it is.
#pragma once

#include <string>

namespace rocket {

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace rocket
