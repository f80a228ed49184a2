// The precision map `rocket build --precision` applies: what it refuses (by name), that the plan
// file keeps it, and that conditioning a BF16 fuel to a map gives exactly the blob of the same
// weights forged in that format from the BF16 checkpoint (forge --from), for NVFP4 and block FP8, on
// the host and (NVFP4 experts, its register code) the h200 plan.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "error_of.h"
#include "compiler/condition.h"
#include "compiler/memory_map.h"
#include "compiler/precision_map.h"
#include "core/error.h"
#include "fuel/forge.h"
#include "fuel/fuel.h"
#include "scratch_dir.h"
#include "test_paths.h"

namespace rocket {
namespace {

namespace fs = std::filesystem;

using test::error_of;

class PrecisionMapTest : public test::ScratchDirTest {
 protected:
  PrecisionMapTest() : ScratchDirTest("rocket_precision_map") {}
  void SetUp() override {
    ScratchDirTest::SetUp();
    bf16_ = forge_fuel(WeightFormat::kBF16, "");
  }

  std::string forge_fuel(WeightFormat format, const std::string& from) {
    const std::string out = (dir_ / fmt::format("{}{}", format_name(format), from.empty() ? "" : "-from")).string();
    forge(ForgeOptions{.fuel = "tiny", .from = from, .format = format, .seed = 5, .out = out,
                       .tokenizer_dir = test::qwen_tokenizer_dir()});
    return out;
  }

  std::vector<uint8_t> blob(const Fuel& fuel, const Chemistry& chem, const std::string& booster) {
    return conditioned_blob(fuel, plan_memory(chem, PlanOptions{.booster = booster}));
  }

  std::string bf16_;
};

TEST_F(PrecisionMapTest, ConvertsToTheBlobOfTheSameWeightsForged) {
  const Fuel source = Fuel::open(bf16_);
  struct Case {
    WeightFormat format;
    const char* map;
    const char* booster;
  };
  for (const Case& c : {Case{WeightFormat::kNVFP4, "experts=nvfp4", "host"},
                        Case{WeightFormat::kNVFP4, "experts=nvfp4", "h200"},
                        Case{WeightFormat::kFP8, "attn_proj=fp8,gdn_proj=fp8,shared_expert=fp8,experts=fp8", "host"}}) {
    const Fuel forged = Fuel::open(forge_fuel(c.format, bf16_));
    Chemistry chem = source.chemistry();
    apply_precision_map(chem, c.map, c.booster);
    for (int r = 0; r < int(Role::kCount); ++r)
      EXPECT_EQ(chem.precision(Role(r)), forged.chemistry().precision(Role(r))) << c.map << " " << role_name(Role(r));
    const auto converted = blob(source, chem, c.booster), stored = blob(forged, forged.chemistry(), c.booster);
    EXPECT_EQ(converted.size(), stored.size()) << c.map;
    EXPECT_TRUE(converted == stored) << c.map << " on " << c.booster << ": converted blob differs from the forged one";
    fs::remove_all(forged.dir());
  }
}

TEST_F(PrecisionMapTest, PlanFileKeepsTheMap) {
  Chemistry chem = Fuel::open(bf16_).chemistry();
  const std::string before = chem.fingerprint();
  apply_precision_map(chem, "lm_head=nvfp4,router=fp8", "host");
  EXPECT_NE(chem.fingerprint(), before);
  EXPECT_EQ(precision_map_spec(chem), "lm_head=nvfp4,router=fp8_block128");
  const Chemistry back = chemistry_from_json(chem.to_json());
  EXPECT_EQ(back.fingerprint(), chem.fingerprint());
  EXPECT_EQ(back.precision(Role::kLmHead), Precision::kNVFP4);
  EXPECT_EQ(back.precision(Role::kRouter), Precision::kFP8Block);
  EXPECT_EQ(back.precision(Role::kExperts), Precision::kBF16);
  // Naming a role at its format's own precision is no override.
  apply_precision_map(chem, "lm_head=bf16", "host");
  EXPECT_EQ(precision_map_spec(chem), "router=fp8_block128");
}

TEST_F(PrecisionMapTest, RefusesByName) {
  Chemistry bf16 = Fuel::open(bf16_).chemistry();
  auto refusal = [&](Chemistry c, const std::string& spec, const std::string& booster) {
    return error_of([&] { apply_precision_map(c, spec, booster); });
  };
  EXPECT_NE(refusal(bf16, "mlp=nvfp4", "host").find("unknown weight role 'mlp'"), std::string::npos);
  EXPECT_NE(refusal(bf16, "experts=int4", "host").find("unknown precision 'int4'"), std::string::npos);
  EXPECT_NE(refusal(bf16, "experts", "host").find("expected role=precision"), std::string::npos);
  EXPECT_NE(refusal(bf16, "embed=fp8", "host").find("the embedding is a gather"), std::string::npos);
  EXPECT_EQ(refusal(bf16, "attn_proj=fp8,gdn_proj=fp8,router=fp8,shared_expert=fp8,experts=fp8", "h200"), "");
  EXPECT_EQ(refusal(bf16, "lm_head=fp8", "h200"), "");
  EXPECT_NE(refusal(bf16, "shared_expert_gate=fp8", "h200").find("shared_expert_gate=fp8_block128"), std::string::npos);
  EXPECT_NE(refusal(bf16, "lm_head=nvfp4", "h200").find("lm_head=nvfp4"), std::string::npos);
  EXPECT_EQ(refusal(bf16, "experts=nvfp4", "h200"), "");
  const Chemistry nvfp4 = Fuel::open(forge_fuel(WeightFormat::kNVFP4, bf16_)).chemistry();
  EXPECT_NE(refusal(nvfp4, "experts=fp8", "host").find("only BF16 weights are converted"), std::string::npos);
}

TEST_F(PrecisionMapTest, BuildAdmitsOnlyAMapItsGatePassed) {
  const Chemistry fuel = Fuel::open(bf16_).chemistry();
  Chemistry chem = fuel;
  apply_precision_map(chem, "experts=nvfp4", "host");
  auto report = [&](const std::string& name, nlohmann::json r) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << r.dump();
    return path;
  };
  const nlohmann::json passed = {{"passed", true}, {"fuel_fingerprint", fuel.fingerprint()},
                                 {"candidate", {{"precision", "experts=nvfp4"}}},
                                 {"reference", {{"precision", "all bf16"}}},
                                 {"thresholds", {{"max_kl_mean", 0.05}}},
                                 {"figures", {{"kl_mean", 0.01}}},
                                 {"violations", nlohmann::json::array()}};
  const nlohmann::json admitted = admit_precision_map(chem, fuel.fingerprint(), report("ok.json", passed));
  EXPECT_EQ(admitted["map"], "experts=nvfp4");
  EXPECT_EQ(admitted["figures"]["kl_mean"], 0.01);
  auto refusal = [&](const char* name, const nlohmann::json& r) {
    const std::string path = report(name, r);
    return error_of([&] { admit_precision_map(chem, fuel.fingerprint(), path); });
  };
  nlohmann::json r = passed;
  r["passed"] = false;
  r["violations"] = {"KL mean 0.1 > 0.05"};
  EXPECT_NE(refusal("rejected.json", r).find("the gate rejected experts=nvfp4"), std::string::npos);
  r = passed;
  r["candidate"]["precision"] = "experts=fp8_block128";
  EXPECT_NE(refusal("other-map.json", r).find("judged the map experts=fp8_block128"), std::string::npos);
  r = passed;
  r["fuel_fingerprint"] = "0000000000000000";
  EXPECT_NE(refusal("other-fuel.json", r).find("the fuel with fingerprint 0000000000000000"), std::string::npos);
  r = passed;
  r["reference"]["precision"] = "experts=nvfp4";
  EXPECT_NE(refusal("other-reference.json", r).find("not an all-BF16 engine"), std::string::npos);
  EXPECT_NE(refusal("junk.json", nlohmann::json::array()).find("not a report of rocket gate"), std::string::npos);
}

}  // namespace
}  // namespace rocket
