// The vision tower in a plan (plan/plan_vision.h): a host or h200 plan of a fuel with a tower carries its
// BF16 tensors after the text model's, byte for byte the fuel's, with the vision config and image tokens;
// an h200 plan also bounds one image by its prefill chunk, holds the tower's device buffers and refuses a
// head_dim its kernels lack; the image tokens and mrope_section are read from config.json as the
// releases write them, and the image processor from preprocessor_config.json (or the defaults, said so).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "boosters/profile.h"
#include "compiler/codegen.h"
#include "compiler/condition.h"
#include "compiler/kernel_selection.h"
#include "compiler/memory_map.h"
#include "error_of.h"
#include "fuel/fuel.h"
#include "kernels/tiling/vision.h"
#include "multimodal_fixtures.h"
#include "plan/plan.h"
#include "test_paths.h"

namespace rocket {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;

class PlanVisionTest : public test::ForgedTinyMultimodalTest {
 protected:
  // The plan `rocket build` validates: the memory map, and an h200 plan's kernel table.
  static Plan plan_of(const PlanOptions& po) {
    Plan p = plan_memory(fuel_->chemistry(), po);
    p.kernels = select_kernels(p);
    return p;
  }
  static PlanOptions host_options(bool with_vision) { return options("host", with_vision); }
  // An h200 plan's options take the committed profile's limits, for its kernel table (plan_of).
  static PlanOptions options(const std::string& booster, bool with_vision) {
    PlanOptions po;
    po.booster = booster;
    if (booster == "h200") po.limits = booster_limits(load_profile(test::source_dir() + "/boosters/h200.json"));
    if (with_vision) {
      po.vision = plan_vision_of_config(fuel_->config(), *fuel_->vision(), fuel_->chemistry().vocab, "config.json");
      read_vision_processor((*dir_ / "tiny").string(), *po.vision);
    }
    return po;
  }
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
  for (const char* booster : {"host", "h200"}) {
    SCOPED_TRACE(booster);
    const Plan mm = plan_memory(fuel_->chemistry(), options(booster, true));
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
}

// An h200 plan carries the tower as a host plan does (after the text model, BF16, the same names), lowers
// the processor's max_pixels to what one prefill piece holds, and holds the tower's three buffers.
TEST_F(PlanVisionTest, AnH200PlanCarriesTheTowerAndItsBuffers) {
  const Plan text = plan_of(options("h200", false));
  const Plan mm = plan_of(options("h200", true));
  mm.validate("plan");
  ASSERT_TRUE(mm.vision);
  for (const PlanTensor& t : text.tensors) EXPECT_EQ(mm.tensor(t.name).offset, t.offset) << t.name;
  for (const TensorSpec& t : vision_tower_manifest(mm.vision->tower)) {
    const PlanTensor& m = mm.tensor(t.name);
    EXPECT_GE(m.offset, text.blob_bytes) << t.name;
    EXPECT_EQ(m.dtype, DType::kBF16) << t.name;
    EXPECT_EQ(m.bytes, t.nbytes()) << t.name;
  }
  // The bound: the fuel's 4096² lowered to 2048 merged tokens of 32² pixels (~1448²), the fuel's kept.
  EXPECT_EQ(mm.prefill_chunk, 2048);
  EXPECT_EQ(mm.vision->processor.max_pixels, 2048u * 32 * 32);
  EXPECT_EQ(mm.vision->max_pixels_requested, 16777216u);
  EXPECT_EQ(mm.vision->processor.min_pixels, 65536u);
  const json processor = mm.to_json()["vision"]["processor"];
  EXPECT_EQ(processor["max_pixels"], 2097152);
  EXPECT_EQ(processor["max_pixels_requested"], 16777216);
  const Plan back = Plan::from_json(mm.to_json(), "plan.json");
  back.validate("plan.json");
  EXPECT_TRUE(back.vision && *back.vision == *mm.vision);
  EXPECT_EQ(back.vision->max_pixels_requested, 16777216u);
  EXPECT_EQ(back.to_json(), mm.to_json());
  // A host plan keeps the fuel's bound and records no request.
  const Plan host = plan_memory(fuel_->chemistry(), host_options(true));
  EXPECT_EQ(host.vision->processor.max_pixels, 16777216u);
  EXPECT_EQ(host.vision->max_pixels_requested, 0u);
  EXPECT_FALSE(host.to_json()["vision"]["processor"].contains("max_pixels_requested"));
  for (const char* name : {"vision_inputs", "vision_scratch", "image_rows"})
    EXPECT_FALSE(std::any_of(host.buffers.begin(), host.buffers.end(), [&](const PlanBuffer& b) { return b.name == name; }))
        << name;

  // The buffers, for one image of 2048 · 2² = 8192 patches (the tiny tower: hidden 64, 4 heads of 16,
  // intermediate 128, 1536 values a patch, 2×2 merge into the text width), worked by hand:
  EXPECT_EQ(mm.vision->max_patches(), 8192);
  const uint64_t P = 8192, H = uint64_t(fuel_->chemistry().hidden);
  // pixels fp32 [P][1536]; taps int4 and float4 [P]; cos and sin fp32 [P][8]; tiles int4 [64 + 2048].
  EXPECT_EQ(mm.buffer("vision_inputs").bytes, P * 1536 * 4 + 2 * P * 16 + 2 * P * 8 * 4 + (64 + 2048) * 16);
  // act bf16 [P][1536]; normed bf16 [P][64]; wide fp32 [P][192]; q, k, v bf16 [4][P][16]; attn bf16
  // [P][64]; hidden fp32 [P][64]; merged fp32 [P/4][H] (every part a 256 multiple here).
  EXPECT_EQ(mm.buffer("vision_scratch").bytes,
            P * 1536 * 2 + P * 64 * 2 + P * 192 * 4 + 3 * (4 * P * 16 * 2) + P * 64 * 2 + P * 64 * 4 + P / 4 * H * 4);
  EXPECT_EQ(mm.buffer("image_rows").bytes, 5 * 2048 * H * 2);  // a call's staging rows + the encoder cache, bf16
  // The engine's constants: the patch bound next to the tower's shapes.
  const std::string header = generate_engine_header(mm);
  EXPECT_NE(header.find("constexpr int64_t kVisionMaxPatches = 8192;"), std::string::npos);
  EXPECT_NE(generate_engine_header(text).find("constexpr int64_t kVisionMaxPatches = 0;"), std::string::npos);
  EXPECT_NE(header.find("kBufBytes_vision_scratch"), std::string::npos);

  // A smaller chunk lowers it further; a fuel bound already under the chunk's is kept as it is.
  PlanOptions po = options("h200", true);
  po.prefill_chunk = 128;
  const Plan small = plan_memory(fuel_->chemistry(), po);
  EXPECT_EQ(small.vision->processor.max_pixels, 128u * 1024);
  EXPECT_EQ(small.vision->max_patches(), 512);
  EXPECT_EQ(small.buffer("image_rows").bytes, 5 * 128 * H * 2);
  po = options("h200", true);
  po.vision->processor.max_pixels = 1048576;
  const Plan under = plan_memory(fuel_->chemistry(), po);
  EXPECT_EQ(under.vision->processor.max_pixels, 1048576u);
  EXPECT_EQ(under.vision->max_pixels_requested, 0u);
  EXPECT_EQ(under.vision->max_patches(), 4096);
  // Lowering is idempotent: the carried plan's vision gives the same plan (build --weights-only).
  po = options("h200", true);
  po.vision = mm.vision;
  EXPECT_EQ(plan_of(po).to_json(), mm.to_json());
}

TEST_F(PlanVisionTest, AnH200PlanRefusesWhatItsEngineCannotRun) {
  // A minimum over the chunk's bound: the releases' 256² with 32-token pieces (32 · 32² = 32768 pixels).
  PlanOptions po = options("h200", true);
  po.prefill_chunk = 32;
  std::string e = error_of([&] { plan_memory(fuel_->chemistry(), po); });
  EXPECT_NE(e.find("under the image processor's min_pixels 65536"), std::string::npos) << e;
  EXPECT_NE(e.find("raise --prefill-chunk to 64 or more"), std::string::npos) << e;
  // A head_dim the h200 vision attention is not instantiated for (64 / 2 heads = 32); the host runs it.
  po = options("h200", true);
  po.vision->tower.heads = 2;
  e = error_of([&] { plan_memory(fuel_->chemistry(), po); });
  EXPECT_NE(e.find("head_dim 32 (vision_config hidden_size 64 / num_heads 2) has no h200 vision attention kernel"),
            std::string::npos) << e;
  PlanOptions host = host_options(true);
  host.vision->tower.heads = 2;
  plan_memory(fuel_->chemistry(), host).validate("plan");
  EXPECT_TRUE(tiling::vision_attention_head_dim(16) && tiling::vision_attention_head_dim(72));
  EXPECT_FALSE(tiling::vision_attention_head_dim(32) || tiling::vision_attention_head_dim(80));

  // A plan.json whose bound is over its chunk, whose buffers are not the tower's, or whose record of the
  // lowered bound is not over it, is refused when read.
  const Plan mm = plan_of(options("h200", true));
  json j = mm.to_json();
  j["vision"]["processor"]["max_pixels"] = 4194304;
  e = error_of([&] { Plan::from_json(j, "plan.json").validate("plan.json"); });
  EXPECT_NE(e.find("max_pixels 4194304 is over the prefill chunk's 2097152"), std::string::npos) << e;
  Plan wrong = mm;
  for (PlanBuffer& b : wrong.buffers)
    if (b.name == "vision_scratch") b.bytes -= 256;
  e = error_of([&] { wrong.validate("plan.json"); });
  EXPECT_NE(e.find("needs buffer vision_scratch of"), std::string::npos) << e;
  j = mm.to_json();
  j["vision"]["processor"]["max_pixels_requested"] = 2097152;
  e = error_of([&] { Plan::from_json(j, "plan.json"); });
  EXPECT_NE(e.find("max_pixels_requested 2097152 is not over max_pixels 2097152"), std::string::npos) << e;
  // A host plan made an h200 one: its processor's bound and buffers are not the h200 engine's.
  Plan relabelled = plan_memory(fuel_->chemistry(), host_options(true));
  relabelled.booster = "h200";
  EXPECT_NE(error_of([&] { relabelled.validate("plan.json"); }).find("within one prefill piece"), std::string::npos);
}

// The tiling's layouts (kernels/tiling/vision.h): parts in order, each 256-byte aligned, tiles bounded.
TEST(VisionTiling, LayoutsAreAlignedPartsInOrder) {
  const tiling::VisionDims releases{.hidden = 1152, .heads = 16, .head_dim = 72, .intermediate = 4304, .patch_dim = 1536,
                                    .merge = 2, .out_hidden = 2048};
  for (int64_t patches : {4, 36, 100, 4096, 8192}) {
    const tiling::VisionScratchLayout s = tiling::vision_scratch_layout(releases, patches);
    const uint64_t parts[] = {s.act, s.normed, s.wide, s.q, s.k, s.v, s.attn, s.hidden, s.merged, s.bytes};
    for (size_t i = 0; i + 1 < std::size(parts); ++i) {
      EXPECT_EQ(parts[i] % 256, 0u);
      EXPECT_LT(parts[i], parts[i + 1]);
    }
    const uint64_t n = uint64_t(patches);
    EXPECT_EQ(s.normed - s.act, (n * 4304 * 2 + 255) / 256 * 256);
    EXPECT_EQ(s.k - s.q, (16 * n * 80 * 2 + 255) / 256 * 256);  // head_dim 72 padded to 80
    EXPECT_EQ(s.bytes - s.merged, (n / 4 * 2048 * 4 + 255) / 256 * 256);
    const tiling::VisionInputsLayout in = tiling::vision_inputs_layout(patches, 1536, 72, 2);
    const uint64_t at[] = {in.pixels, in.tap_rows, in.tap_weights, in.cos, in.sin, in.tiles, in.bytes};
    EXPECT_EQ(in.pixels, 0u);
    for (size_t i = 0; i + 1 < std::size(at); ++i) {
      EXPECT_EQ(at[i] % 256, 0u);
      EXPECT_LT(at[i], at[i + 1]);
    }
    EXPECT_EQ(in.tap_rows, (n * 1536 * 4 + 255) / 256 * 256);
    EXPECT_EQ(in.sin - in.cos, (n * 36 * 4 + 255) / 256 * 256);
    EXPECT_EQ(in.max_tiles, int((patches + 127) / 128 + patches / 4));
    EXPECT_EQ(in.bytes - in.tiles, (uint64_t(in.max_tiles) * 16 + 255) / 256 * 256);
    EXPECT_EQ(tiling::vision_inputs_bytes(patches, 1536, 72, 2), in.bytes);
  }
  // The tile bound holds for every split of 8192 patches into frames of merge² or more: the worst is one
  // frame of 4 patches after another (2048 tiles), or frames of 132 (2 tiles each for 132 patches).
  const auto tiles = [](const std::vector<int64_t>& frames) {
    int64_t n = 0;
    for (int64_t f : frames) n += (f + 127) / 128;
    return n;
  };
  EXPECT_LE(tiles(std::vector<int64_t>(2048, 4)), tiling::vision_max_tiles(8192, 2));
  std::vector<int64_t> frames(62, 132);
  frames.push_back(8192 - 62 * 132);
  EXPECT_LE(tiles(frames), tiling::vision_max_tiles(8192, 2));
  EXPECT_LE(tiles({8192}), tiling::vision_max_tiles(8192, 2));
}

TEST_F(PlanVisionTest, AMissingTowerTensorIsRefused) {
  // A tower tensor missing from the memory map.
  Plan missing = plan_memory(fuel_->chemistry(), host_options(true));
  std::erase_if(missing.tensors, [](const PlanTensor& t) { return t.name == "visual.merger.linear_fc2.bias"; });
  EXPECT_NE(error_of([&] { missing.validate("plan.json"); }).find("visual.merger.linear_fc2.bias"), std::string::npos);
}

// forge --layout multimodal writes the releases' preprocessor_config.json; the plan records it, and
// plan.json carries it back.
TEST_F(PlanVisionTest, ThePlanRecordsTheFuelsPreprocessorConfig) {
  std::ifstream in(*dir_ / "tiny" / "preprocessor_config.json");
  ASSERT_TRUE(in.good());
  const json written = json::parse(in);
  EXPECT_EQ(written["size"], json({{"longest_edge", 16777216}, {"shortest_edge", 65536}}));
  EXPECT_EQ(written["patch_size"], 16);
  EXPECT_EQ(written["merge_size"], 2);
  EXPECT_EQ(written["image_processor_type"], "Qwen2VLImageProcessorFast");

  const Plan mm = plan_memory(fuel_->chemistry(), host_options(true));
  ASSERT_TRUE(mm.vision);
  EXPECT_EQ(mm.vision->processor_source, "preprocessor_config.json");
  EXPECT_EQ(mm.vision->processor.min_pixels, 65536u);
  EXPECT_EQ(mm.vision->processor.max_pixels, 16777216u);
  const json recorded = mm.to_json()["vision"]["processor"];
  EXPECT_EQ(recorded["min_pixels"], 65536);
  EXPECT_EQ(recorded["max_pixels"], 16777216);
  EXPECT_EQ(recorded["source"], "preprocessor_config.json");

  // Other bounds in the fuel are the plan's, and read back; a plan changed in its bounds is another plan.
  const fs::path other = *dir_ / "other_bounds";
  fs::create_directories(other);
  json changed = written;
  changed["size"] = {{"shortest_edge", 4096}, {"longest_edge", 1048576}};
  std::ofstream(other / "preprocessor_config.json") << changed.dump();
  PlanOptions po = host_options(true);
  read_vision_processor(other.string(), *po.vision);
  const Plan bounded = plan_memory(fuel_->chemistry(), po);
  EXPECT_EQ(bounded.vision->processor.min_pixels, 4096u);
  EXPECT_EQ(bounded.vision->processor.max_pixels, 1048576u);
  const Plan back = Plan::from_json(bounded.to_json(), "plan.json");
  EXPECT_EQ(back.vision->processor.min_pixels, 4096u);
  EXPECT_EQ(back.vision->processor.max_pixels, 1048576u);
  EXPECT_TRUE(*back.vision == *bounded.vision);
  EXPECT_FALSE(*back.vision == *mm.vision);
  EXPECT_NE(bounded.plan_fingerprint(), mm.plan_fingerprint());

  // Without a preprocessor_config.json the releases' defaults are recorded, and said to be.
  const fs::path none = *dir_ / "no_preprocessor";
  fs::create_directories(none);
  read_vision_processor(none.string(), *po.vision);
  EXPECT_EQ(po.vision->processor_source, "defaults");
  EXPECT_EQ(po.vision->processor.min_pixels, 65536u);
  EXPECT_EQ(po.vision->processor.max_pixels, 16777216u);
  EXPECT_EQ(po.vision->processor.patch_size, 16);
  EXPECT_EQ(plan_memory(fuel_->chemistry(), po).to_json()["vision"]["processor"]["source"], "defaults");

  // One that does not fit the tower is refused at build time, naming the file and the field.
  changed = written;
  changed["patch_size"] = 14;
  std::ofstream(other / "preprocessor_config.json") << changed.dump();
  std::string e = error_of([&] { read_vision_processor(other.string(), *po.vision); });
  EXPECT_NE(e.find("preprocessor_config.json: patch_size 14 is not the vision tower's patch_size 16"), std::string::npos) << e;
  std::ofstream(other / "preprocessor_config.json") << "{not json";
  e = error_of([&] { read_vision_processor(other.string(), *po.vision); });
  EXPECT_NE(e.find("preprocessor_config.json: not valid JSON"), std::string::npos) << e;

  // A plan.json whose processor does not fit its tower, or that predates the processor, is refused.
  json plan_json = mm.to_json();
  plan_json["vision"]["processor"]["merge_size"] = 4;
  e = error_of([&] { Plan::from_json(plan_json, "plan.json"); });
  EXPECT_NE(e.find("merge_size 4 is not the vision tower's spatial_merge_size 2"), std::string::npos) << e;
  plan_json["vision"].erase("processor");
  e = error_of([&] { Plan::from_json(plan_json, "plan.json"); });
  EXPECT_NE(e.find("vision has no processor"), std::string::npos) << e;
}

// A preprocessor_config.json as the Qwen3-VL / Qwen3.5 releases write it, and each refusal.
TEST(PlanVisionProcessor, ReadsTheReleasesShapeAndRefusesWhatDoesNotFit) {
  VisionTowerConfig tower;
  tower.depth = 1, tower.hidden = 64, tower.heads = 4, tower.intermediate = 128, tower.out_hidden = 128;
  tower.position_embeddings = 64, tower.hidden_act = "gelu_pytorch_tanh";
  const json release = json::parse(R"({
    "size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16, "temporal_patch_size": 2,
    "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"})");
  VisionProcessorConfig p = vision_processor_of(&release, tower, "pre.json");
  EXPECT_EQ(p.min_pixels, 65536u);
  EXPECT_EQ(p.max_pixels, 16777216u);
  EXPECT_EQ(p.patch_size, 16);
  EXPECT_EQ(p.temporal_patch_size, 2);
  EXPECT_EQ(p.merge_size, 2);
  EXPECT_EQ(p.image_mean, (std::array<float, 3>{0.5f, 0.5f, 0.5f}));
  EXPECT_DOUBLE_EQ(p.rescale_factor, 1.0 / 255.0);

  // Qwen2-VL's keys: min_pixels and max_pixels override size, as in HF; the CLIP mean and std as written.
  json q2 = release;
  q2["min_pixels"] = 3136;
  q2["max_pixels"] = 12845056;
  q2["image_mean"] = {0.48145466, 0.4578275, 0.40821073};
  q2["image_std"] = {0.26862954, 0.26130258, 0.27577711};
  q2["rescale_factor"] = 0.00392156862745098;
  q2["resample"] = 3;
  q2["do_resize"] = true;
  p = vision_processor_of(&q2, tower, "pre.json");
  EXPECT_EQ(p.min_pixels, 3136u);
  EXPECT_EQ(p.max_pixels, 12845056u);
  EXPECT_FLOAT_EQ(p.image_mean[0], 0.48145466f);
  EXPECT_FLOAT_EQ(p.image_std[2], 0.27577711f);

  // Absent: the releases' defaults on the tower's geometry.
  tower.patch = 14;
  p = vision_processor_of(nullptr, tower, "pre.json");
  EXPECT_EQ(p.patch_size, 14);
  EXPECT_EQ(p.min_pixels, 65536u);
  EXPECT_EQ(p.image_std, (std::array<float, 3>{0.5f, 0.5f, 0.5f}));
  tower.patch = 16;

  const auto refused = [&](const std::function<void(json&)>& edit) {
    json j = release;
    edit(j);
    return error_of([&] { vision_processor_of(&j, tower, "pre.json"); });
  };
  auto says = [](const std::string& e, const std::string& what) {
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  says(refused([](json& j) { j["patch_size"] = 14; }), "pre.json: patch_size 14 is not the vision tower's patch_size 16");
  says(refused([](json& j) { j["merge_size"] = 1; }), "merge_size 1 is not the vision tower's spatial_merge_size 2");
  says(refused([](json& j) { j["temporal_patch_size"] = 1; }), "temporal_patch_size 1 is not the vision tower's");
  says(refused([](json& j) { j.erase("patch_size"); }), "pre.json: no patch_size");
  says(refused([](json& j) { j.erase("image_mean"); }), "pre.json: no image_mean");
  says(refused([](json& j) { j.erase("size"); }), "no pixel bounds");
  says(refused([](json& j) { j["size"] = {{"height", 224}, {"width", 224}}; }), "needs shortest_edge and longest_edge");
  says(refused([](json& j) { j["size"]["shortest_edge"] = 0; }), "min_pixels 0 is not an integer in [1, 67108864]");
  says(refused([](json& j) { j["size"]["longest_edge"] = int64_t{1} << 30; }), "max_pixels 1073741824 is not an integer");
  says(refused([](json& j) { j["size"]["longest_edge"] = 1000; }), "the maximum pixel count 1000 (longest_edge) is under the minimum 65536");
  says(refused([](json& j) { j["size"] = {{"shortest_edge", 100}, {"longest_edge", 1000}}; }),
       "the maximum pixel count 1000 is under one merged patch (32² = 1024 pixels)");
  says(refused([](json& j) { j["image_std"] = {0.5, 0, 0.5}; }), "image_std [0.5,0,0.5] is not three finite positive numbers");
  says(refused([](json& j) { j["image_mean"] = {0.5, 0.5}; }), "image_mean [0.5,0.5] is not three numbers");
  says(refused([](json& j) { j["resample"] = 2; }), "resample 2 is not 3 (bicubic)");
  says(refused([](json& j) { j["do_normalize"] = false; }), "do_normalize false");
  says(refused([](json& j) { j["image_processor_type"] = "SiglipImageProcessor"; }), "is not Qwen2VLImageProcessor[Fast]");
  says(refused([](json& j) { j["rescale_factor"] = 0; }), "rescale_factor 0 is not a positive number");
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
