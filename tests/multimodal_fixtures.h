// The tiny fuel forged with its vision tower (`rocket forge --fuel tiny --layout multimodal`, fused
// experts, seed 1), once per test suite: `dir_ / "tiny"` and the opened `fuel_`, for the suites that
// read a multimodal fuel (plan_vision_test, vision_tower_test). `dir_` is the suite's scratch
// directory (named for this process), removed with everything in it after the suite.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "fuel/forge.h"
#include "fuel/fuel.h"
#include "test_paths.h"

namespace rocket::test {

class ForgedTinyMultimodalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    namespace fs = std::filesystem;
    dir_ = new fs::path(fs::temp_directory_path() / ("rocket_tiny_multimodal_" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    forge(ForgeOptions{.fuel = "tiny", .layout = Layout::kMultimodal, .experts = ExpertLayout::kFused, .seed = 1,
                       .out = (*dir_ / "tiny").string(), .tokenizer_dir = qwen_tokenizer_dir()});
    fuel_ = new Fuel(Fuel::open((*dir_ / "tiny").string()));
  }
  static void TearDownTestSuite() {
    delete fuel_;
    fuel_ = nullptr;
    std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  static inline std::filesystem::path* dir_ = nullptr;
  static inline Fuel* fuel_ = nullptr;
};

}  // namespace rocket::test
