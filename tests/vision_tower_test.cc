// The vision tower: its config and manifest against the published releases, the forged tower as the
// fuel loader checks it, the position and rotary arithmetic by hand, the host forward's properties
// (shapes, one image's output independent of the others, frames attended separately), and parity with
// the HF reference's golden (tests/golden/vision_tiny.json, made by tools/reference/vision_golden.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "error_of.h"
#include "fuel/forge.h"
#include "fuel/fuel.h"
#include "fuel/vision_tower.h"
#include "kernels/host/activations.h"
#include "kernels/host/layer_norm.h"
#include "multimodal_fixtures.h"
#include "test_paths.h"
#include "vision/golden_patches.h"
#include "vision/tower.h"

namespace rocket {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using vision::ImageGrid;
using vision::PatchPosition;

// Qwen/Qwen3.6-35B-A3B's published vision_config (the Qwen3.5-35B-A3B release has the same tower).
const char* kPublishedVisionConfig = R"({
  "deepstack_visual_indexes": [], "depth": 27, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1152,
  "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4304, "model_type": "qwen3_5_moe",
  "num_heads": 16, "num_position_embeddings": 2304, "out_hidden_size": 2048, "patch_size": 16,
  "spatial_merge_size": 2, "temporal_patch_size": 2})";

json published_config() { return json{{"vision_config", json::parse(kPublishedVisionConfig)}}; }

TEST(VisionTowerConfig, ReadsThePublishedTowerAndListsItsTensors) {
  const auto v = vision_tower_config(published_config(), "config.json");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->head_dim(), 72);
  EXPECT_EQ(v->patch_dim(), 3 * 2 * 16 * 16);
  EXPECT_EQ(v->merged_dim(), 4608);
  EXPECT_EQ(v->grid_side(), 48);
  const std::vector<TensorSpec> m = vision_tower_manifest(*v);
  // 333 tensors, as the BF16 and -FP8 releases carry under model.visual. (every one BF16).
  EXPECT_EQ(m.size(), 333u);
  uint64_t params = 0;
  for (const TensorSpec& t : m) {
    EXPECT_EQ(t.dtype, DType::kBF16) << t.name;
    EXPECT_TRUE(t.name.starts_with("visual.")) << t.name;
    EXPECT_TRUE(checkpoint_name(t.name, Layout::kMultimodal).starts_with("model.visual.")) << t.name;
    params += t.nbytes() / 2;
  }
  EXPECT_EQ(params, 446'571'248u);  // ≈0.45 B parameters, ≈0.89 GB in BF16
  auto shape_of = [&](const std::string& name) {
    for (const TensorSpec& t : m)
      if (t.name == name) return t.shape;
    ADD_FAILURE() << "no " << name;
    return std::vector<int64_t>{};
  };
  EXPECT_EQ(shape_of("visual.patch_embed.proj.weight"), (std::vector<int64_t>{1152, 3, 2, 16, 16}));
  EXPECT_EQ(shape_of("visual.patch_embed.proj.bias"), (std::vector<int64_t>{1152}));
  EXPECT_EQ(shape_of("visual.pos_embed.weight"), (std::vector<int64_t>{2304, 1152}));
  EXPECT_EQ(shape_of("visual.blocks.26.attn.qkv.weight"), (std::vector<int64_t>{3456, 1152}));
  EXPECT_EQ(shape_of("visual.blocks.26.mlp.linear_fc1.weight"), (std::vector<int64_t>{4304, 1152}));
  EXPECT_EQ(shape_of("visual.merger.linear_fc1.weight"), (std::vector<int64_t>{4608, 4608}));
  EXPECT_EQ(shape_of("visual.merger.linear_fc2.weight"), (std::vector<int64_t>{2048, 4608}));
  EXPECT_EQ(vision_tower_config(json::object(), "config.json"), std::nullopt);
}

TEST(VisionTowerConfig, RefusesWhatTheForwardDoesNotRun) {
  auto refusal = [](const char* key, json value) {
    json c = published_config();
    c["vision_config"][key] = std::move(value);
    return test::error_of([&] { vision_tower_config(c, "config.json"); });
  };
  EXPECT_NE(refusal("deepstack_visual_indexes", {8, 16, 24}).find("DeepStack"), std::string::npos);
  EXPECT_NE(refusal("num_position_embeddings", 2300).find("not a square grid"), std::string::npos);
  EXPECT_NE(refusal("hidden_act", "silu").find("hidden_act 'silu' is not supported"), std::string::npos);
  EXPECT_NE(refusal("num_heads", 5).find("num_heads"), std::string::npos);  // 1152 / 5
  EXPECT_NE(refusal("num_heads", 64).find("not a multiple of 4"), std::string::npos);  // head_dim 18
}

// ---- positions and rotary, by hand ----

TEST(VisionTowerPositions, PatchesComeWindowByWindow) {
  const std::vector<PatchPosition> p = vision::patch_positions(ImageGrid{1, 4, 6}, 2);
  ASSERT_EQ(p.size(), 24u);
  const std::vector<PatchPosition> first = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}};
  EXPECT_EQ(std::vector<PatchPosition>(p.begin(), p.begin() + 8), first);
  EXPECT_EQ(p[12], (PatchPosition{2, 0}));  // the second row of windows
  EXPECT_EQ(p[23], (PatchPosition{3, 5}));
}

TEST(VisionTowerPositions, TheNativeGridReadsTheTableItself) {
  const int side = 8, dim = 5;
  std::vector<float> table(size_t(side * side * dim));
  for (size_t i = 0; i < table.size(); ++i) table[i] = std::sin(0.37f * float(i)) * 3.0f;
  const ImageGrid g{2, side, side};
  std::vector<float> out(size_t(g.patches() * dim), NAN);
  vision::interpolate_positions(table.data(), side, dim, g, 2, out.data());
  const std::vector<PatchPosition> where = vision::patch_positions(g, 2);
  for (int f = 0; f < 2; ++f)
    for (size_t k = 0; k < where.size(); ++k)
      for (int d = 0; d < dim; ++d)
        ASSERT_EQ(out[(f * where.size() + k) * dim + d], table[size_t((where[k].row * side + where[k].col) * dim + d)])
            << "frame " << f << " patch " << k << " dim " << d;
}

TEST(VisionTowerPositions, SmallerAndLargerGridsInterpolateBilinearly) {
  // A 2 x 2 table of one dim: value = 10·row + col, so bilinear resampling is exact at every point.
  const std::vector<float> table = {0, 1, 10, 11};
  const ImageGrid g{1, 4, 2};  // merge 1: raster order
  std::vector<float> out(8);
  vision::interpolate_positions(table.data(), 2, 1, g, 1, out.data());
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) EXPECT_NEAR(out[size_t(r * 2 + c)], 10.0f * float(r) / 3.0f + float(c), 1e-6f) << r << "," << c;
  // A 2 x 2 grid of an 8 x 8 table reads its four corners.
  std::vector<float> big(64);
  std::iota(big.begin(), big.end(), 0.0f);
  std::vector<float> corners(4);
  vision::interpolate_positions(big.data(), 8, 1, ImageGrid{1, 2, 2}, 2, corners.data());
  EXPECT_EQ(corners, (std::vector<float>{0, 7, 56, 63}));
}

TEST(VisionTowerPositions, RotaryAtTheOriginIsTheIdentityAndOtherwiseRotatesRowsThenColumns) {
  const int heads = 2, hd = 8;
  std::vector<float> x(size_t(heads * hd));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f + float(i) * 0.25f;
  std::vector<float> y = x;
  vision::rotate_2d(y.data(), heads, hd, {0, 0}, 10000.0);
  EXPECT_EQ(y, x);
  // (row 1, col 0): dims 0 and 1 rotate with 4 and 5 by 1 and 1/100 radians (theta^(2/4) = 100); the
  // column quarter (dims 2, 3 with 6, 7) stays.
  y = x;
  vision::rotate_2d(y.data(), heads, hd, {1, 0}, 10000.0);
  for (int h = 0; h < heads; ++h) {
    const float* a = x.data() + h * hd;
    const float* b = y.data() + h * hd;
    const double angle[2] = {1.0, 0.01};
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(b[i], a[i] * std::cos(angle[i]) - a[i + 4] * std::sin(angle[i]), 1e-6);
      EXPECT_NEAR(b[i + 4], a[i + 4] * std::cos(angle[i]) + a[i] * std::sin(angle[i]), 1e-6);
    }
    for (int i : {2, 3, 6, 7}) EXPECT_EQ(b[i], a[i]);
  }
  // q·k depends on the offset between the two patches only, along rows and columns alike.
  auto score = [&](PatchPosition pq, PatchPosition pk) {
    std::vector<float> q = x, k(x.rbegin(), x.rend());
    vision::rotate_2d(q.data(), 1, hd, pq, 10000.0);
    vision::rotate_2d(k.data(), 1, hd, pk, 10000.0);
    return std::inner_product(q.begin(), q.begin() + hd, k.begin(), 0.0);
  };
  EXPECT_NEAR(score({2, 3}, {1, 1}), score({5, 7}, {4, 5}), 1e-4);
  EXPECT_GT(std::abs(score({2, 3}, {1, 1}) - score({3, 2}, {1, 1})), 1e-3);  // rows and columns differ
}

TEST(VisionTowerOps, LayerNormAndGeluByHand) {
  const float x[4] = {1, 2, 3, 4};
  const uint16_t w[4] = {f32_to_bf16(1), f32_to_bf16(2), f32_to_bf16(0.5f), f32_to_bf16(1)};
  const uint16_t b[4] = {f32_to_bf16(0), f32_to_bf16(1), f32_to_bf16(0), f32_to_bf16(-1)};
  float y[4];
  host::layer_norm(x, w, b, 4, 1e-6f, y);
  const double inv = 1.0 / std::sqrt(1.25 + 1e-6);  // mean 2.5, biased variance 1.25
  EXPECT_NEAR(y[0], -1.5 * inv, 1e-6);
  EXPECT_NEAR(y[1], -0.5 * inv * 2 + 1, 1e-6);
  EXPECT_NEAR(y[2], 0.5 * inv * 0.5, 1e-6);
  EXPECT_NEAR(y[3], 1.5 * inv - 1, 1e-6);
  EXPECT_NEAR(host::gelu_tanh(1.0f), 0.8411920, 1e-6);  // torch.nn.functional.gelu(1, approximate="tanh")
  EXPECT_NEAR(host::gelu_erf(1.0f), 0.8413447, 1e-6);   // torch.nn.functional.gelu(1)
  EXPECT_NEAR(host::gelu_erf(-2.0f), -0.0455003, 1e-6);
}

// ---- the forged tower, loaded and run ----

// One tiny multimodal fuel for the suite (forging it is most of the suite's time). Seed 1, fused
// experts: the fuel tools/reference/vision_golden.py is run on.
class VisionTowerFuelTest : public test::ForgedTinyMultimodalTest {
 protected:
  // The goldens' deterministic patches (vision/golden_patches.h).
  static std::vector<float> patch_values(uint32_t which, int64_t count) { return vision::golden_patch_values(which, count); }

  static int64_t patch_count(const std::vector<ImageGrid>& grids) {
    int64_t n = 0;
    for (const ImageGrid& g : grids) n += g.patches();
    return n;
  }
};

TEST_F(VisionTowerFuelTest, TheForgedTowerIsCheckedAndRecorded) {
  ASSERT_TRUE(fuel_->vision());
  const VisionTowerConfig& v = *fuel_->vision();
  EXPECT_EQ(v.depth, 2);
  EXPECT_EQ(v.hidden, 64);
  EXPECT_EQ(v.heads, 4);
  EXPECT_EQ(v.out_hidden, fuel_->chemistry().hidden);
  const std::vector<TensorSpec> m = vision_tower_manifest(v);
  uint64_t bytes = 0;
  for (const TensorSpec& t : m) {
    const TensorView view = fuel_->tensor(t.name);
    EXPECT_EQ(view.name, "model." + t.name);
    EXPECT_EQ(view.shape, t.shape);
    bytes += view.nbytes;
  }
  // Still no plan loads it: the record says so, with every tensor counted.
  bool recorded = false;
  for (const UnusedTensors& u : fuel_->unused())
    if (u.part == "vision") {
      recorded = true;
      EXPECT_EQ(u.prefix, "model.visual.");
      EXPECT_EQ(u.tensors, int64_t(m.size()));
      EXPECT_EQ(u.bytes, bytes);
    }
  EXPECT_TRUE(recorded);
  // The config HF reads: the tower, and the image tokens of the fuel's own tokenizer.
  std::ifstream in(*dir_ / "tiny" / "config.json");
  const json config = json::parse(in);
  EXPECT_EQ(config["vision_config"], v.to_json());
  EXPECT_EQ(config["image_token_id"], 151655);
  EXPECT_EQ(config["vision_start_token_id"], 151652);
}

TEST_F(VisionTowerFuelTest, AFuelWhoseTowerDiffersFromItsConfigIsRefused) {
  const fs::path copy = *dir_ / "edited";
  fs::remove_all(copy);
  fs::copy(*dir_ / "tiny", copy);
  auto with = [&](const char* key, int value) {
    std::ifstream in(*dir_ / "tiny" / "config.json");
    json c = json::parse(in);
    c["vision_config"][key] = value;
    std::ofstream(copy / "config.json") << c.dump(2);
    return test::error_of([&] { Fuel::open(copy.string()); });
  };
  EXPECT_NE(with("depth", 3).find("missing vision tensor 'model.visual.blocks.2.norm1.weight'"), std::string::npos);
  EXPECT_NE(with("intermediate_size", 96).find("tensor 'model.visual.blocks.0.mlp.linear_fc1.weight'"), std::string::npos);
  EXPECT_NE(with("out_hidden_size", 96).find("differs from the text model's hidden_size 128"), std::string::npos);
  // A tower one block shorter than the checkpoint's: the extra block's tensors are unexpected.
  EXPECT_NE(with("depth", 1).find("unexpected tensor 'model.visual.blocks.1."), std::string::npos);
  fs::remove_all(copy);
}

TEST_F(VisionTowerFuelTest, ForwardShapesAndEachImageAlone) {
  const vision::Tower tower(*fuel_);
  const int dim = tower.config().patch_dim(), out = tower.config().out_hidden;
  const std::vector<ImageGrid> a = {{1, 4, 4}}, b = {{1, 2, 6}}, both = {{1, 4, 4}, {1, 2, 6}};
  const std::vector<float> pa = patch_values(1, patch_count(a) * dim), pb = patch_values(2, patch_count(b) * dim);
  std::vector<float> pab = pa;
  pab.insert(pab.end(), pb.begin(), pb.end());
  const vision::TowerOutput oa = tower.forward(pa, a), ob = tower.forward(pb, b), oab = tower.forward(pab, both);
  ASSERT_EQ(oa.merged.size(), size_t(4 * out));
  ASSERT_EQ(ob.merged.size(), size_t(3 * out));
  ASSERT_EQ(oab.merged.size(), size_t(7 * out));
  ASSERT_EQ(oab.hidden.size(), size_t(28 * 64));
  // Attention runs per image: batched, each image's tokens are bit for bit its own run's (every op is
  // per token except attention, which reads its own image only).
  EXPECT_TRUE(std::equal(oa.merged.begin(), oa.merged.end(), oab.merged.begin()));
  EXPECT_TRUE(std::equal(ob.merged.begin(), ob.merged.end(), oab.merged.begin() + 4 * out));
  for (float x : oab.merged) ASSERT_TRUE(std::isfinite(x));
  // Not a constant: tokens differ from each other, and each merged token depends on its whole image.
  EXPECT_FALSE(std::equal(oa.merged.begin(), oa.merged.begin() + out, oa.merged.begin() + out));
  std::vector<float> changed = pab;
  changed[changed.size() - 1] += 0.5f;  // the last patch of the second image
  const vision::TowerOutput oc = tower.forward(changed, both);
  EXPECT_TRUE(std::equal(oa.merged.begin(), oa.merged.end(), oc.merged.begin()));
  for (int t = 4; t < 7; ++t)
    EXPECT_FALSE(std::equal(oc.merged.begin() + t * out, oc.merged.begin() + (t + 1) * out, oab.merged.begin() + t * out))
        << "merged token " << t << " of the changed image did not change";
}

TEST_F(VisionTowerFuelTest, FramesAreAttendedSeparately) {
  // A two-frame grid is two images of one frame each at the same positions (the reference's cu_seqlens
  // has one segment per frame).
  const vision::Tower tower(*fuel_);
  const int dim = tower.config().patch_dim();
  const std::vector<float> p = patch_values(3, 2 * 16 * int64_t(dim));
  const std::vector<ImageGrid> video = {{2, 4, 4}}, frames = {{1, 4, 4}, {1, 4, 4}};
  EXPECT_EQ(tower.forward(p, video).merged, tower.forward(p, frames).merged);
}

TEST_F(VisionTowerFuelTest, RefusesGridsThatAreNotWholeWindows) {
  const vision::Tower tower(*fuel_);
  const std::vector<float> p = patch_values(4, 12 * int64_t(tower.config().patch_dim()));
  EXPECT_NE(test::error_of([&] { tower.forward(p, std::vector<ImageGrid>{{1, 3, 4}}); }).find("image 0: grid t=1 h=3 w=4"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { tower.forward(p, std::vector<ImageGrid>{{1, 4, 4}}); }).find("for 1 image(s) of 16 patches"),
            std::string::npos);
}

// Parity with the HF reference (Qwen3_5MoeVisionModel in FP32 on the same BF16 weights).
TEST_F(VisionTowerFuelTest, MatchesTheReferenceGolden) {
  const fs::path path = fs::path(test::test_data()) / "golden" / "vision_tiny.json";
  if (!fs::exists(path))
    GTEST_SKIP() << path << " is not committed yet: it is made on the GPU machine by tools/reference/vision_golden.py "
                 << "(docs/vision-tower.md says how)";
  std::ifstream in(path);
  const json golden = json::parse(in);
  ASSERT_EQ(golden["fuel"]["seed"], 1);
  // FP32 on both sides over the same BF16 weights: only rounding order differs (blocked dot products,
  // cuBLAS against host::linear, expf/tanhf/erff against CUDA's), as in the text model's parity
  // (tests/golden/README.md, tiny.tolerance = 1e-5 on the same measure). The golden records the
  // reference's own noise (its batched against its one-image-at-a-time run) beside it.
  constexpr double tolerance = 1e-5;
  const vision::Tower tower(*fuel_);
  const int dim = tower.config().patch_dim();
  ASSERT_FALSE(golden["cases"].empty());
  for (const json& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<ImageGrid> grids;
    for (const json& g : c["grids"]) grids.push_back({g[0].get<int>(), g[1].get<int>(), g[2].get<int>()});
    const std::vector<float> p = patch_values(c["patch_seed"].get<uint32_t>(), patch_count(grids) * dim);
    const vision::TowerOutput got = tower.forward(p, grids);
    for (const char* what : {"merged", "hidden"}) {
      if (!c.contains(what)) continue;
      const std::vector<float> want = c[what].get<std::vector<float>>();
      const std::vector<float>& have = std::string(what) == "merged" ? got.merged : got.hidden;
      ASSERT_EQ(have.size(), want.size()) << what;
      // One difference measure: the largest |difference| over the largest |reference value|.
      double worst = 0, scale = 0;
      size_t at = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        scale = std::max(scale, double(std::abs(want[i])));
        const double d = std::abs(double(have[i]) - double(want[i]));
        if (d > worst) worst = d, at = i;
      }
      EXPECT_LE(worst / scale, tolerance) << what << ": worst at " << at << ": " << have[at] << " vs " << want[at];
    }
  }
}

}  // namespace
}  // namespace rocket
