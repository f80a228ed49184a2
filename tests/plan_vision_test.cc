// The vision tower in a plan (plan/plan_vision.h): a host plan of a fuel with a tower carries its BF16
// tensors after the text model's, byte for byte the fuel's, with the vision config and image tokens; an
// h200 plan may not carry one; the image tokens and mrope_section are read from config.json as the
// releases write them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "compiler/condition.h"
#include "compiler/memory_map.h"
#include "error_of.h"
#include "fuel/forge.h"
#include "fuel/fuel.h"
#include "plan/plan.h"
#include "test_paths.h"

namespace rocket {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;

class PlanVisionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("rocket_plan_vision_" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    forge(ForgeOptions{.fuel = "tiny", .layout = Layout::kMultimodal, .experts = ExpertLayout::kFused, .seed = 1,
                       .out = (*dir_ / "tiny").string(), .tokenizer_dir = test::qwen_tokenizer_dir()});
    fuel_ = new Fuel(Fuel::open((*dir_ / "tiny").string()));
  }
  static void TearDownTestSuite() {
    delete fuel_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  static PlanOptions host_options(bool with_vision) {
    PlanOptions po;
    po.booster = "host";
    if (with_vision)
      po.vision = plan_vision_of_config(fuel_->config(), *fuel_->vision(), fuel_->chemistry().vocab, "config.json");
    return po;
  }

  static inline fs::path* dir_ = nullptr;
  static inline Fuel* fuel_ = nullptr;
};

TEST_F(PlanVisionTest, AHostPlanCarriesTheTowerAfterTheTextModel) {
  ASSERT_TRUE(fuel_->vision());
  const Plan text = plan_memory(fuel_->chemistry(), host_options(false));
  const Plan mm = plan_memory(fuel_->chemistry(), host_options(true));
  mm.validate("plan");
  ASSERT_TRUE(mm.vision);
  EXPECT_FALSE(text.vision);
  // The image tokens of the fuel's tokenizer (Qwen's <|image_pad|>, <|vision_start|>, <|vision_end|>) and
  // the reference's default section (forge's config names none).
  EXPECT_EQ(mm.vision->image_token, 151655);
  EXPECT_EQ(mm.vision->vision_start_token, 151652);
  EXPECT_EQ(mm.vision->vision_end_token, 151653);
  EXPECT_EQ(mm.vision->mrope_section, (std::array<int, 3>{11, 11, 10}));
  EXPECT_EQ(mm.vision->tower.to_json(), fuel_->vision()->to_json());
  // The text model sits where it sits in a text plan; every tower tensor follows it.
  for (const PlanTensor& t : text.tensors) {
    const PlanTensor& m = mm.tensor(t.name);
    EXPECT_EQ(m.offset, t.offset) << t.name;
    EXPECT_EQ(m.bytes, t.bytes) << t.name;
  }
  const std::vector<TensorSpec> tower = vision_tower_manifest(mm.vision->tower);
  EXPECT_EQ(mm.tensors.size(), text.tensors.size() + tower.size());
  for (const TensorSpec& t : tower) {
    const PlanTensor& m = mm.tensor(t.name);
    EXPECT_GE(m.offset, text.blob_bytes) << t.name;
    EXPECT_EQ(m.dtype, DType::kBF16) << t.name;
  }
  EXPECT_GT(mm.blob_bytes, text.blob_bytes);
  // plan.json says so, and reads back the same; a text plan's has no "vision".
  EXPECT_FALSE(text.to_json().contains("vision"));
  const Plan back = Plan::from_json(mm.to_json(), "plan.json");
  back.validate("plan.json");
  EXPECT_EQ(back.to_json(), mm.to_json());
  EXPECT_TRUE(back.vision && *back.vision == *mm.vision);
  EXPECT_NE(back.plan_fingerprint(), text.plan_fingerprint());
}

TEST_F(PlanVisionTest, TheBlobHoldsTheFuelsTowerBytes) {
  const Plan mm = plan_memory(fuel_->chemistry(), host_options(true));
  const std::string blob_path = (*dir_ / "weights.blob").string();
  condition_weights(*fuel_, mm, blob_path);
  std::ifstream in(blob_path, std::ios::binary);
  const std::vector<char> blob{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ASSERT_EQ(blob.size(), mm.blob_bytes);
  for (const TensorSpec& t : vision_tower_manifest(mm.vision->tower)) {
    const PlanTensor& p = mm.tensor(t.name);
    const TensorView v = fuel_->tensor(t.name);
    ASSERT_EQ(v.nbytes, p.bytes) << t.name;
    EXPECT_EQ(std::memcmp(blob.data() + p.offset, v.data, p.bytes), 0) << t.name;
  }
  // And the text model's bytes are where the text plan puts them.
  const PlanTensor& embed = mm.tensor("embed_tokens.weight");
  EXPECT_EQ(std::memcmp(blob.data() + embed.offset, fuel_->tensor("embed_tokens.weight").data, embed.bytes), 0);
}

TEST_F(PlanVisionTest, OnlyAHostPlanMayCarryIt) {
  Plan mm = plan_memory(fuel_->chemistry(), host_options(true));
  mm.booster = "h200";
  EXPECT_NE(error_of([&] { mm.validate("plan.json"); }).find("only the host engine runs one"), std::string::npos);
  // A tower tensor missing from the memory map.
  Plan missing = plan_memory(fuel_->chemistry(), host_options(true));
  std::erase_if(missing.tensors, [](const PlanTensor& t) { return t.name == "visual.merger.linear_fc2.bias"; });
  EXPECT_NE(error_of([&] { missing.validate("plan.json"); }).find("visual.merger.linear_fc2.bias"), std::string::npos);
}

TEST(PlanVisionConfig, ReadsTokensAndSectionAsTheReleasesWriteThem) {
  VisionTowerConfig tower;
  tower.depth = 1, tower.hidden = 64, tower.heads = 4, tower.intermediate = 128, tower.out_hidden = 128;
  tower.position_embeddings = 64, tower.hidden_act = "gelu_pytorch_tanh";
  json config = {{"image_token_id", 248056}, {"vision_start_token_id", 248053}, {"vision_end_token_id", 248054},
                 {"text_config", {{"rope_parameters", {{"mrope_interleaved", true}, {"mrope_section", {11, 11, 10}},
                                                       {"partial_rotary_factor", 0.25}, {"rope_theta", 1e7}}}}}};
  PlanVision v = plan_vision_of_config(config, tower, 248320, "config.json");
  EXPECT_EQ(v.image_token, 248056);
  EXPECT_EQ(v.vision_start_token, 248053);
  EXPECT_EQ(v.vision_end_token, 248054);
  EXPECT_EQ(v.mrope_section, (std::array<int, 3>{11, 11, 10}));
  // Another section is taken as written; older configs keep it under rope_scaling.
  config["text_config"]["rope_parameters"]["mrope_section"] = {2, 1, 1};
  EXPECT_EQ(plan_vision_of_config(config, tower, 248320, "c").mrope_section, (std::array<int, 3>{2, 1, 1}));
  json older = config;
  older["text_config"].erase("rope_parameters");
  older["text_config"]["rope_scaling"] = {{"type", "default"}, {"mrope_section", {16, 24, 24}}};
  EXPECT_EQ(plan_vision_of_config(older, tower, 248320, "c").mrope_section, (std::array<int, 3>{16, 24, 24}));
  // Refusals name the field.
  config["text_config"]["rope_parameters"]["mrope_section"] = {2, 1};
  EXPECT_NE(error_of([&] { plan_vision_of_config(config, tower, 248320, "c"); }).find("mrope_section"), std::string::npos);
  config["text_config"]["rope_parameters"]["mrope_section"] = {11, 11, 10};
  EXPECT_NE(error_of([&] { plan_vision_of_config(config, tower, 248056, "c"); }).find("image_token_id 248056"),
            std::string::npos);
  config.erase("vision_end_token_id");
  EXPECT_NE(error_of([&] { plan_vision_of_config(config, tower, 248320, "c"); }).find("vision_end_token_id"),
            std::string::npos);
}

}  // namespace
}  // namespace rocket
