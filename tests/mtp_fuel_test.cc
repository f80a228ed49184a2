// The MTP draft layer in the fuel: a config that declares `mtp_num_hidden_layers` has its layer
// checked tensor by tensor in every format and layout the forge writes, readable by name, recorded
// with the unused parts and left out of a plan that does not draft; a missing one is refused by
// name; forge --from carries it. A drafting plan (draft_tokens) carries it in its blob, BF16 and
// byte for byte the checkpoint's, with a KV layer and buffers of its own.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compiler/condition.h"
#include "compiler/memory_map.h"
#include "core/error.h"
#include "fuel/forge.h"
#include "fuel/fuel.h"
#include "fuel/manifest.h"
#include "scratch_dir.h"
#include "test_paths.h"

namespace rocket {
namespace {

namespace fs = std::filesystem;

class MtpFuelTest : public test::ScratchDirTest {
 protected:
  MtpFuelTest() : ScratchDirTest("rocket_mtp_fuel") {}

  std::string forge_fuel(WeightFormat format, Layout layout, ExpertLayout experts, bool mtp) {
    const std::string out = (dir_ / fmt::format("{}-{}-{}-{}", format_name(format), layout == Layout::kText ? "text" : "mm",
                                                expert_layout_name(experts), mtp)).string();
    forge(ForgeOptions{.fuel = "tiny", .format = format, .layout = layout, .experts = experts, .seed = 7, .mtp = mtp,
                       .out = out, .tokenizer_dir = test::qwen_tokenizer_dir()});
    return out;
  }
};

TEST_F(MtpFuelTest, CheckedInEveryFormatAndLayoutAndLeftOutOfThePlan) {
  struct Case {
    WeightFormat format;
    Layout layout;
    ExpertLayout experts;
  };
  for (const Case& c : {Case{WeightFormat::kBF16, Layout::kText, ExpertLayout::kPerExpert},
                        Case{WeightFormat::kBF16, Layout::kMultimodal, ExpertLayout::kFused},
                        Case{WeightFormat::kFP8, Layout::kText, ExpertLayout::kPerExpert},
                        Case{WeightFormat::kNVFP4, Layout::kMultimodal, ExpertLayout::kPerExpert}}) {
    const Fuel with = Fuel::open(forge_fuel(c.format, c.layout, c.experts, true));
    const Fuel without = Fuel::open(forge_fuel(c.format, c.layout, c.experts, false));
    const std::string what = fmt::format("{} {}", format_name(c.format), expert_layout_name(c.experts));
    EXPECT_EQ(with.chemistry().mtp_layers, 1) << what;
    EXPECT_NE(with.chemistry().fingerprint(), without.chemistry().fingerprint()) << what;
    const TensorView fc = with.tensor("mtp.fc.weight");
    EXPECT_EQ(fc.shape, (std::vector<int64_t>{128, 256})) << what;
    EXPECT_EQ(with.tensor("mtp.layers.0.mlp.experts.15.down_proj.weight").dtype, DType::kBF16) << what;
    EXPECT_EQ(with.tensor("mtp.layers.0.self_attn.q_proj.weight").shape, (std::vector<int64_t>{256, 128})) << what;
    // Recorded with the parts no engine builds yet, and not in the plan.
    bool recorded = false;
    for (const UnusedTensors& u : with.unused()) recorded |= u.part == "mtp" && u.tensors >= 10;
    EXPECT_TRUE(recorded) << what;
    EXPECT_EQ(with.total_bytes(), without.total_bytes()) << what;
    EXPECT_EQ(plan_memory(with.chemistry(), {}).blob_bytes, plan_memory(without.chemistry(), {}).blob_bytes) << what;
  }
}

TEST_F(MtpFuelTest, MissingTensorIsRefusedByName) {
  const std::string dir = forge_fuel(WeightFormat::kBF16, Layout::kText, ExpertLayout::kPerExpert, false);
  // Declared, but the checkpoint has none: the loader names the first missing tensor.
  nlohmann::json config;
  std::ifstream(fs::path(dir) / "config.json") >> config;
  config["mtp_num_hidden_layers"] = 1;
  std::ofstream(fs::path(dir) / "config.json") << config.dump(2);
  try {
    Fuel::open(dir);
    FAIL() << "a declared MTP layer without its tensors loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing MTP tensor 'mtp.fc.weight'"), std::string::npos) << e.what();
  }
}

TEST_F(MtpFuelTest, ForgeFromCarriesTheLayer) {
  const std::string source = forge_fuel(WeightFormat::kBF16, Layout::kText, ExpertLayout::kPerExpert, true);
  const std::string out = (dir_ / "nvfp4-from").string();
  forge(ForgeOptions{.from = source, .format = WeightFormat::kNVFP4, .out = out});
  const Fuel a = Fuel::open(source), b = Fuel::open(out);
  EXPECT_EQ(b.chemistry().mtp_layers, 1);
  for (const TensorSpec& t : mtp_manifest(a.chemistry())) {
    const TensorView x = a.tensor(t.name), y = b.tensor(t.name);
    ASSERT_EQ(x.nbytes, y.nbytes) << t.name;
    EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0) << t.name;
  }
}

TEST_F(MtpFuelTest, DraftingPlanCarriesTheLayer) {
  const Fuel fuel = Fuel::open(forge_fuel(WeightFormat::kNVFP4, Layout::kText, ExpertLayout::kPerExpert, true));
  const Plan plain = plan_memory(fuel.chemistry(), {});
  const Plan drafting = plan_memory(fuel.chemistry(), {.draft_tokens = 3});
  EXPECT_EQ(plain.find_tensor("mtp.fc.weight"), nullptr);
  EXPECT_EQ(plain.kv_layers(), fuel.chemistry().full_layers());
  EXPECT_FALSE(plain.to_json().contains("draft_tokens"));  // a plain plan is the plan every build wrote before
  EXPECT_EQ(drafting.kv_layers(), fuel.chemistry().full_layers() + 1);
  EXPECT_EQ(drafting.kv_pages, plain.kv_pages / plain.kv_layers() * drafting.kv_layers());
  EXPECT_GT(drafting.blob_bytes, plain.blob_bytes);
  for (const char* b : {"mtp_hidden", "mtp_in", "verify_hidden", "verify_states"}) EXPECT_GT(drafting.buffer(b).bytes, 0u) << b;
  // Every MTP part in the blob, BF16 whatever the model's format, the checkpoint's bytes.
  const std::vector<uint8_t> blob = conditioned_blob(fuel, drafting);
  ASSERT_EQ(blob.size(), drafting.blob_bytes);
  for (const TensorSpec& t : mtp_manifest(fuel.chemistry())) {
    const PlanTensor& pt = drafting.tensor(t.name);
    EXPECT_EQ(pt.dtype, DType::kBF16) << t.name;
    const TensorView v = fuel.tensor(t.name);
    ASSERT_EQ(pt.bytes, v.nbytes) << t.name;
    EXPECT_EQ(std::memcmp(blob.data() + pt.offset, v.data, v.nbytes), 0) << t.name;
  }
  // The model's parts where a plain plan has them: the MTP layer follows them.
  for (const PlanTensor& t : plain.tensors) EXPECT_EQ(drafting.tensor(t.name).offset, t.offset) << t.name;
  // plan.json keeps the draft; a plan that drafts without an MTP layer, or drafts too far, is refused.
  const Plan back = Plan::from_json(drafting.to_json(), "drafting");
  EXPECT_EQ(back.draft_tokens, 3);
  EXPECT_EQ(back.plan_fingerprint(), drafting.plan_fingerprint());
  EXPECT_NE(back.plan_fingerprint(), plain.plan_fingerprint());
  nlohmann::json j = drafting.to_json();
  j["draft_tokens"] = kMaxDraftTokens + 1;
  EXPECT_THROW(Plan::from_json(j, "too far"), Error);
  Plan no_mtp = plan_memory(Fuel::open(forge_fuel(WeightFormat::kNVFP4, Layout::kText, ExpertLayout::kPerExpert, false)).chemistry(), {});
  no_mtp.draft_tokens = 1;
  EXPECT_THROW(no_mtp.validate("no MTP layer"), Error);
}

}  // namespace
}  // namespace rocket
