// A test fixture's scratch directory for forged fuels and conditioned blobs: fresh under the system's
// temporary directory before each test (named for the suite and this process), removed after it.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "compiler/condition.h"
#include "fuel/fuel.h"
#include "plan/plan.h"

namespace rocket::test {

class ScratchDirTest : public ::testing::Test {
 protected:
  explicit ScratchDirTest(const std::string& name)
      : dir_(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()))) {}
  void SetUp() override {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The blob conditioning writes for `plan` from `fuel`, read back (the file is removed).
  std::vector<uint8_t> conditioned_blob(const Fuel& fuel, const Plan& plan) {
    const std::filesystem::path p = dir_ / "weights.blob";
    condition_weights(fuel, plan, p.string());
    std::ifstream f(p, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
    std::filesystem::remove(p);
    return bytes;
  }

  std::filesystem::path dir_;
};

}  // namespace rocket::test
