// A whole file's bytes; Error naming the file when it cannot be read.
#pragma once

#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"

namespace rocket {

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot read", path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace rocket
