// Every checkpoint layout forge writes (text or multimodal names, per-expert or fused experts) is read
// by the fuel loader into the same manifest: one seed in every layout conditions a byte-identical
// blob under the same plan, for every weight format that has the layout.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <cstring>
#include <iterator>

#include "boosters/handshake.h"
#include "compiler/compiler.h"
#include "compiler/condition.h"
#include "compiler/memory_map.h"
#include "core/error.h"
#include "fuel/coactivation.h"
#include "fuel/forge.h"
#include "fuel/fuel.h"
#include "scratch_dir.h"
#include "test_paths.h"

namespace rocket {
namespace {

namespace fs = std::filesystem;

class CheckpointLayoutTest : public test::ScratchDirTest {
 protected:
  CheckpointLayoutTest() : ScratchDirTest("rocket_layouts") {}

  std::string forge_fuel(WeightFormat format, Layout layout, ExpertLayout experts, bool config_only = false) {
    const std::string out = (dir_ / fmt::format("{}-{}-{}", format_name(format), layout == Layout::kText ? "text" : "mm",
                                                expert_layout_name(experts))).string();
    forge(ForgeOptions{.fuel = "tiny", .format = format, .layout = layout, .experts = experts, .seed = 11, .out = out,
                       .tokenizer_dir = test::qwen_tokenizer_dir(), .config_only = config_only});
    return out;
  }

  // The fuel in `other` plans and conditions exactly as the per-expert text fuel in `base` does, on
  // both boosters where the format runs there.
  void expect_same_engine_input(const std::string& base, const std::string& other, WeightFormat format) {
    const Fuel a = Fuel::open(base), b = Fuel::open(other);
    EXPECT_EQ(a.chemistry().fingerprint(), b.chemistry().fingerprint());
    EXPECT_EQ(a.total_bytes(), b.total_bytes());
    for (const char* booster : {"host", "h200"}) {
      SCOPED_TRACE(booster);
      const Plan pa = plan_memory(a.chemistry(), PlanOptions{.booster = booster});
      const Plan pb = plan_memory(b.chemistry(), PlanOptions{.booster = booster});
      EXPECT_EQ(memory_map_difference(pa, pb), "");
      const std::vector<uint8_t> ba = conditioned_blob(a, pa), bb = conditioned_blob(b, pb);
      ASSERT_EQ(ba.size(), pa.blob_bytes);
      EXPECT_TRUE(ba == bb) << other << " conditions a different blob from " << base;
    }
  }
};

TEST_F(CheckpointLayoutTest, Bf16FusedAndMultimodalLayoutsConditionTheSameBlob) {
  const std::string base = forge_fuel(WeightFormat::kBF16, Layout::kText, ExpertLayout::kPerExpert);
  for (Layout layout : {Layout::kText, Layout::kMultimodal})
    for (ExpertLayout experts : {ExpertLayout::kPerExpert, ExpertLayout::kFused}) {
      if (layout == Layout::kText && experts == ExpertLayout::kPerExpert) continue;
      const std::string other = forge_fuel(WeightFormat::kBF16, layout, experts);
      SCOPED_TRACE(other);
      const Fuel f = Fuel::open(other);
      EXPECT_EQ(f.layout(), layout);
      EXPECT_EQ(f.expert_layout(), experts);
      expect_same_engine_input(base, other, WeightFormat::kBF16);
      fs::remove_all(other);
    }
}

TEST_F(CheckpointLayoutTest, QuantisedMultimodalLayoutsConditionTheSameBlob) {
  for (WeightFormat format : {WeightFormat::kFP8, WeightFormat::kNVFP4}) {
    SCOPED_TRACE(format_name(format));
    const std::string base = forge_fuel(format, Layout::kText, ExpertLayout::kPerExpert);
    const std::string other = forge_fuel(format, Layout::kMultimodal, ExpertLayout::kPerExpert);
    expect_same_engine_input(base, other, format);
    // The tower stays BF16 in every format, as the releases keep it (the loader checked its dtypes).
    EXPECT_TRUE(Fuel::open(other).vision());
    fs::remove_all(base);
    fs::remove_all(other);
  }
}

TEST_F(CheckpointLayoutTest, MultimodalFuelRecordsItsVisionAndMtpTensorsInThePlan) {
  const std::string mm = forge_fuel(WeightFormat::kBF16, Layout::kMultimodal, ExpertLayout::kFused);
  testing::internal::CaptureStderr();
  const Fuel f = Fuel::open(mm);
  const std::string notice = testing::internal::GetCapturedStderr();
  const int64_t h = f.chemistry().hidden;
  // What forge writes for those parts: the whole vision tower its config declares (vision_tower.h),
  // and 4 MTP tensors (forge.cc unused_mtp_tensors).
  ASSERT_TRUE(f.vision());
  const std::vector<TensorSpec> tower = vision_tower_manifest(*f.vision());
  uint64_t tower_bytes = 0;
  for (const TensorSpec& t : tower) tower_bytes += t.nbytes();
  const std::vector<UnusedTensors> want = {
      {"vision", "model.visual.", int64_t(tower.size()), tower_bytes},
      {"mtp", "mtp.", 4, uint64_t(h * 2 * h + 3 * h) * 2}};
  EXPECT_EQ(f.unused(), want);
  EXPECT_NE(notice.find("4 mtp tensors under 'mtp.'"), std::string::npos) << notice;
  // A plan built from it carries the record (and survives its JSON round trip).
  Plan p = plan_memory(f.chemistry(), PlanOptions{.booster = "host"});
  p.unused_tensors = f.unused();
  p.fuel_layout = "multimodal names, fused experts";
  const Plan back = Plan::from_json(p.to_json(), "plan.json");
  EXPECT_EQ(back.unused_tensors, want);
  EXPECT_EQ(back.fuel_layout, p.fuel_layout);
}

TEST_F(CheckpointLayoutTest, ForgeRefusesFusedQuantisedExperts) {
  for (WeightFormat format : {WeightFormat::kFP8, WeightFormat::kNVFP4}) {
    try {
      forge_fuel(format, Layout::kMultimodal, ExpertLayout::kFused, /*config_only=*/true);
      ADD_FAILURE() << format_name(format) << ": forged";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("fused routed experts are defined for bf16 checkpoints only"), std::string::npos)
          << e.what();
    }
  }
}

// An h200 plan with an expert order stores each router in unit order (its kernels take the router's
// choice as the unit); a host plan keeps the checkpoint's rows (its engine maps ids to units). The
// blob's fuel fingerprint is the fuel's either way.
TEST_F(CheckpointLayoutTest, H200RoutersFollowTheExpertOrder) {
  const std::string dir = forge_fuel(WeightFormat::kBF16, Layout::kText, ExpertLayout::kPerExpert);
  const Fuel fuel = Fuel::open(dir);
  const Chemistry& c = fuel.chemistry();
  std::vector<std::vector<int>> units(size_t(c.layers));
  for (int l = 0; l < c.layers; ++l)
    for (int e = 0; e < c.experts; ++e) units[size_t(l)].push_back((e * 5 + l + 3) % c.experts);  // a permutation per layer
  const std::string want = fuel_fingerprint(c, [&](const std::string& n) {
    const TensorView v = fuel.tensor(n);
    return std::span<const uint8_t>(v.data, v.nbytes);
  });
  for (const char* booster : {"h200", "host"}) {
    SCOPED_TRACE(booster);
    PlanOptions po;
    po.booster = booster;
    po.expert_units = units;
    const Plan plan = plan_memory(c, po);
    EXPECT_EQ(plan.router_in_unit_order(), std::string(booster) == "h200");
    const fs::path path = dir_ / "ordered.blob";
    condition_weights(fuel, plan, path.string());
    std::ifstream f(path, std::ios::binary);
    const std::vector<uint8_t> blob((std::istreambuf_iterator<char>(f)), {});
    for (int l = 0; l < c.layers; ++l) {
      const TensorView src = fuel.tensor(Plan::router_name(l));
      const PlanTensor& t = plan.tensor(Plan::router_name(l));
      const uint64_t row = t.bytes / uint64_t(c.experts);
      for (int e = 0; e < c.experts; ++e) {
        const uint64_t stored = plan.router_in_unit_order() ? uint64_t(units[size_t(l)][size_t(e)]) : uint64_t(e);
        EXPECT_EQ(std::memcmp(blob.data() + t.offset + stored * row, src.data + uint64_t(e) * row, row), 0)
            << "layer " << l << " expert " << e;
      }
    }
    EXPECT_EQ(blob_fuel_fingerprint(plan, path), want);
    fs::remove(path);
  }
}

}  // namespace
}  // namespace rocket
