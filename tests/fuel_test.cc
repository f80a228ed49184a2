#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/hash.h"
#include "fuel/fuel.h"
#include "fuel/manifest.h"
#include "fuel/safetensors.h"

namespace rocket {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The tiny chemistry of the brief: every kind of layer and both GQA and GDN head repetition, small
// enough that a whole fuel is a few hundred KiB.
json tiny_text_config() {
  return json::parse(R"({
    "architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text",
    "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "hidden_act": "silu",
    "rms_norm_eps": 1e-6, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32, "num_experts_per_tok": 2, "num_experts": 4,
    "tie_word_embeddings": false, "max_position_embeddings": 4096,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25}})");
}

json tiny_config(Layout layout) {
  if (layout == Layout::kText) return tiny_text_config();
  json text = tiny_text_config();
  text.erase("architectures");
  text["model_type"] = "qwen3_5_moe_text";
  return json{{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}, {"model_type", "qwen3_5_moe"},
              {"text_config", text}, {"tie_word_embeddings", false}};
}

// Deterministic bytes per tensor name, so a test can regenerate what was written and compare.
std::vector<uint8_t> bytes_for(const std::string& name, uint64_t n) {
  Fnv64 h;
  h.update(name);
  std::mt19937_64 rng(h.digest());
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

struct Tensor {
  std::string name;  // checkpoint name
  DType dtype;
  std::vector<int64_t> shape;
};

uint64_t nbytes(const Tensor& t) {
  uint64_t n = dtype_size(t.dtype);
  for (auto d : t.shape) n *= uint64_t(d);
  return n;
}

void write_json(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(2); }

// What ModelOpt exports of this family keep unquantised: everything but the routed experts.
const json kNvfp4Exclusions = {"lm_head", "model.embed_tokens", "model.layers.*.self_attn*", "model.layers.*.linear_attn*",
                               "model.layers.*.mlp.gate", "model.layers.*.mlp.shared_expert*"};
// A block-FP8 release's modules_to_not_convert: the router, the GDN gate projections, the shared
// expert's gate and the LM head (matched anywhere in a module's name, as transformers does).
const json kFp8Unconverted = {"lm_head", "mlp.gate", "in_proj_a", "in_proj_b", "shared_expert_gate"};

class FuelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "rocket_fuel_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The checkpoint tensors a correct fuel of this config holds.
  static std::vector<Tensor> manifest_tensors(const json& config, WeightFormat format, Layout layout) {
    std::vector<Tensor> out;
    for (const TensorSpec& s : fuel_manifest(chemistry_from_config(config, format, "config.json")))
      out.push_back({checkpoint_name(s.name, layout), s.dtype, s.shape});
    return out;
  }

  // The tensors of a bf16 fuel whose routed experts are fused in the layers listed (all by default):
  // `experts.gate_up_proj` [E, 2I, H] and `experts.down_proj` [E, H, I] instead of per-expert tensors.
  static std::vector<Tensor> fused_tensors(const json& config, Layout layout, std::vector<int> fused_layers = {0, 1, 2, 3}) {
    std::vector<Tensor> out;
    const std::string prefix = checkpoint_name("layers.", layout);
    for (const Tensor& t : manifest_tensors(config, WeightFormat::kBF16, layout)) {
      bool drop = false;
      for (int l : fused_layers) drop = drop || t.name.starts_with(fmt::format("{}{}.mlp.experts.", prefix, l));
      if (!drop) out.push_back(t);
    }
    for (int l : fused_layers) {
      out.push_back({fmt::format("{}{}.mlp.experts.gate_up_proj", prefix, l), DType::kBF16, {4, 64, 32}});
      out.push_back({fmt::format("{}{}.mlp.experts.down_proj", prefix, l), DType::kBF16, {4, 32, 32}});
    }
    return out;
  }

  // Writes config.json and the tensors, in `shards` files with an index (or one model.safetensors
  // when shards == 0). Tensors are dealt round-robin so every shard holds every kind.
  void write_fuel(const json& config, const std::vector<Tensor>& tensors, int shards = 0) {
    write_json(dir_ / "config.json", config);
    const int files = std::max(shards, 1);
    std::vector<std::vector<Tensor>> per(files);
    for (size_t i = 0; i < tensors.size(); ++i) per[i % files].push_back(tensors[i]);
    json weight_map = json::object();
    for (int s = 0; s < files; ++s) {
      const std::string file =
          shards == 0 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, files);
      std::vector<SafetensorsWriter::Entry> entries;
      for (const Tensor& t : per[s]) entries.push_back({t.name, t.dtype, t.shape});
      SafetensorsWriter w((dir_ / file).string(), entries, {{"format", "pt"}});
      for (const Tensor& t : per[s]) {
        auto b = bytes_for(t.name, nbytes(t));
        w.write(t.name, b.data(), b.size());
        weight_map[t.name] = file;
      }
      w.finish();
    }
    if (shards > 0) write_json(dir_ / "model.safetensors.index.json", {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}});
  }

  // Opens the fuel expecting an Error that mentions every needle.
  void expect_refused(std::initializer_list<std::string> needles) {
    try {
      Fuel::open(dir_.string());
      FAIL() << "fuel accepted";
    } catch (const Error& e) {
      std::string msg = e.what();
      for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    }
  }

  // Every manifest tensor is reachable by canonical name and bitwise what was written.
  static void expect_all_tensors(const Fuel& f) {
    uint64_t total = 0;
    for (const TensorSpec& s : f.manifest()) {
      TensorView v = f.tensor(s.name);
      EXPECT_EQ(v.dtype, s.dtype) << s.name;
      EXPECT_EQ(v.shape, s.shape) << s.name;
      auto want = bytes_for(checkpoint_name(s.name, f.layout()), s.nbytes());
      ASSERT_EQ(v.nbytes, want.size()) << s.name;
      EXPECT_EQ(std::memcmp(v.data, want.data(), want.size()), 0) << s.name;
      total += v.nbytes;
    }
    EXPECT_EQ(f.total_bytes(), total);
  }

  fs::path dir_;
};

TEST_F(FuelTest, LoadsTextLayoutSingleFile) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText));
  Fuel f = Fuel::open(dir_.string());
  EXPECT_EQ(f.layout(), Layout::kText);
  EXPECT_EQ(f.chemistry().hidden, 32);
  EXPECT_EQ(f.chemistry().format, WeightFormat::kBF16);
  EXPECT_EQ(f.chemistry().full_layers(), 1);
  EXPECT_EQ(f.dir(), dir_.string());
  EXPECT_EQ(f.config()["vocab_size"], 64);
  EXPECT_TRUE(f.generation_config().is_object() && f.generation_config().empty());
  expect_all_tensors(f);
  EXPECT_EQ(f.tensor("layers.0.linear_attn.conv1d.weight").shape, (std::vector<int64_t>{128, 1, 4}));  // q,k: 2·16 each, v: 4·16
}

TEST_F(FuelTest, LoadsMultimodalLayoutShardedViaIndex) {
  json cfg = tiny_config(Layout::kMultimodal);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kMultimodal), 3);
  write_json(dir_ / "generation_config.json", {{"temperature", 0.6}, {"top_p", 0.95}});
  Fuel f = Fuel::open(dir_.string());
  EXPECT_EQ(f.layout(), Layout::kMultimodal);
  EXPECT_EQ(f.generation_config()["top_p"], 0.95);
  expect_all_tensors(f);
  // Same chemistry as the text-only config: the layout is a naming detail, not an architecture one.
  EXPECT_EQ(f.chemistry().fingerprint(),
            chemistry_from_config(tiny_text_config(), WeightFormat::kBF16, "c").fingerprint());
}

TEST_F(FuelTest, MovedFuelKeepsViews) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText), 2);
  Fuel a = Fuel::open(dir_.string());
  const uint8_t* p = a.tensor("lm_head.weight").data;
  Fuel b(std::move(a));
  EXPECT_EQ(b.tensor("lm_head.weight").data, p);
  expect_all_tensors(b);
}

TEST_F(FuelTest, RecordsVisionAndMtpTensorsAsUnused) {
  json cfg = tiny_config(Layout::kMultimodal);
  auto t = manifest_tensors(cfg, WeightFormat::kBF16, Layout::kMultimodal);
  t.push_back({"model.visual.blocks.0.attn.qkv.weight", DType::kBF16, {8, 8}});
  t.push_back({"model.visual.merger.linear_fc1.weight", DType::kBF16, {8}});
  t.push_back({"mtp.layers.0.input_layernorm.weight", DType::kBF16, {32}});
  t.push_back({"mtp.fc.weight", DType::kBF16, {32, 64}});
  t.push_back({"mtp.norm.weight", DType::kBF16, {32}});
  write_fuel(cfg, t, 2);
  testing::internal::CaptureStderr();
  Fuel f = Fuel::open(dir_.string());
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("2 vision tensors under 'model.visual.' (144 bytes) are recorded as unused"), std::string::npos) << err;
  EXPECT_NE(err.find("3 mtp tensors under 'mtp.' (4224 bytes)"), std::string::npos) << err;
  const std::vector<UnusedTensors> want = {{"vision", "model.visual.", 2, 144}, {"mtp", "mtp.", 3, 4224}};
  EXPECT_EQ(f.unused(), want);
  expect_all_tensors(f);
}

TEST_F(FuelTest, NoNoticeWhenNothingIsUnused) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText));
  testing::internal::CaptureStderr();
  Fuel f = Fuel::open(dir_.string());
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST_F(FuelTest, LoadsModelOptNvfp4FromHfQuantConfig) {
  json cfg = tiny_config(Layout::kText);
  write_json(dir_ / "hf_quant_config.json",
             {{"producer", {{"name", "modelopt"}, {"version", "0.29.0"}}},
              {"quantization", {{"quant_algo", "NVFP4"}, {"kv_cache_quant_algo", nullptr}, {"group_size", 16},
                                {"exclude_modules", kNvfp4Exclusions}}}});
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kNVFP4, Layout::kText), 2);
  Fuel f = Fuel::open(dir_.string());
  EXPECT_EQ(f.chemistry().format, WeightFormat::kNVFP4);
  TensorView w = f.tensor("layers.1.mlp.experts.3.down_proj.weight");
  EXPECT_EQ(w.dtype, DType::kU8);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{32, 16}));  // packed: two e2m1 per byte
  EXPECT_EQ(f.tensor("layers.1.mlp.experts.3.down_proj.weight_scale").dtype, DType::kF8E4M3);
  EXPECT_EQ(f.tensor("layers.1.mlp.experts.3.down_proj.weight_scale_2").shape, std::vector<int64_t>{});
  EXPECT_EQ(f.tensor("layers.3.self_attn.q_proj.weight").dtype, DType::kBF16);
  expect_all_tensors(f);
}

TEST_F(FuelTest, LoadsModelOptNvfp4FromConfigQuantizationConfig) {
  json cfg = tiny_config(Layout::kMultimodal);
  cfg["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16}};
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kNVFP4, Layout::kMultimodal));
  Fuel f = Fuel::open(dir_.string());
  EXPECT_EQ(f.chemistry().format, WeightFormat::kNVFP4);
  expect_all_tensors(f);
}

TEST_F(FuelTest, LoadsBlockFp8) {
  json cfg = tiny_config(Layout::kText);
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                                {"weight_block_size", {128, 128}}};
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kFP8, Layout::kText), 2);
  Fuel f = Fuel::open(dir_.string());
  EXPECT_EQ(f.chemistry().format, WeightFormat::kFP8);
  EXPECT_EQ(f.tensor("layers.0.linear_attn.in_proj_qkv.weight").dtype, DType::kF8E4M3);
  EXPECT_EQ(f.tensor("layers.0.linear_attn.in_proj_qkv.weight_scale_inv").shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(f.tensor("embed_tokens.weight").dtype, DType::kBF16);
  expect_all_tensors(f);
}

TEST_F(FuelTest, CutsFusedExpertsIntoPerExpertViews) {
  json cfg = tiny_config(Layout::kMultimodal);
  write_fuel(cfg, fused_tensors(cfg, Layout::kMultimodal), 2);
  Fuel f = Fuel::open(dir_.string());
  EXPECT_EQ(f.expert_layout(), ExpertLayout::kFused);
  // gate_up_proj[e] is expert e's 32 gate rows, then its 32 up rows, each row 32 bf16 values;
  // down_proj[e] is its [32, 32] down projection.
  const std::string base = "model.language_model.layers.2.mlp.experts.";
  const auto gate_up = bytes_for(base + "gate_up_proj", 4 * 64 * 32 * 2), down = bytes_for(base + "down_proj", 4 * 32 * 32 * 2);
  const uint64_t proj = 32 * 32 * 2;
  for (int e = 0; e < 4; ++e) {
    const std::string x = fmt::format("layers.2.mlp.experts.{}.", e);
    const TensorView g = f.tensor(x + "gate_proj.weight"), u = f.tensor(x + "up_proj.weight"), d = f.tensor(x + "down_proj.weight");
    EXPECT_EQ(g.shape, (std::vector<int64_t>{32, 32}));
    ASSERT_EQ(g.nbytes, proj);
    EXPECT_EQ(std::memcmp(g.data, gate_up.data() + e * 2 * proj, proj), 0) << e;
    EXPECT_EQ(std::memcmp(u.data, gate_up.data() + e * 2 * proj + proj, proj), 0) << e;
    EXPECT_EQ(std::memcmp(d.data, down.data() + e * proj, proj), 0) << e;
  }
  // Everything else is read as written, and the fused bytes count once.
  uint64_t total = 0;
  for (const TensorSpec& s : f.manifest()) total += s.nbytes();
  EXPECT_EQ(f.total_bytes(), total);
  EXPECT_EQ(std::memcmp(f.tensor("lm_head.weight").data, bytes_for("lm_head.weight", 64 * 32 * 2).data(), 64 * 32 * 2), 0);
}

TEST_F(FuelTest, LoadsBlockFp8WithItsUnconvertedModules) {
  json cfg = tiny_config(Layout::kMultimodal);
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}},
                                {"modules_to_not_convert", kFp8Unconverted}};
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kFP8, Layout::kMultimodal), 2);
  Fuel f = Fuel::open(dir_.string());
  EXPECT_EQ(f.tensor("layers.0.linear_attn.in_proj_a.weight").dtype, DType::kBF16);
  EXPECT_EQ(f.tensor("layers.0.mlp.experts.1.up_proj.weight_scale_inv").dtype, DType::kF32);
  expect_all_tensors(f);
}

// --- Refusals ---

TEST_F(FuelTest, RefusesMixedExpertLayoutsNamingATensorOfEach) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, fused_tensors(cfg, Layout::kText, {1}));
  expect_refused({"mixes expert layouts", "'model.layers.1.mlp.experts.down_proj' is a fused",
                  "'model.layers.0.mlp.experts.0.down_proj.weight' a per-expert"});
}

TEST_F(FuelTest, RefusesMisshapedFusedExperts) {
  json cfg = tiny_config(Layout::kMultimodal);
  auto t = fused_tensors(cfg, Layout::kMultimodal);
  for (auto& x : t)
    if (x.name == "model.language_model.layers.3.mlp.experts.gate_up_proj") x.shape = {4, 32, 32};  // up rows missing
  write_fuel(cfg, t);
  expect_refused({"fused experts", "'model.language_model.layers.3.mlp.experts.gate_up_proj'",
                  "expected BF16 [4, 64, 32], found BF16 [4, 32, 32]", "1 problem"});
}

TEST_F(FuelTest, RefusesMissingFusedTensor) {
  json cfg = tiny_config(Layout::kText);
  auto t = fused_tensors(cfg, Layout::kText);
  std::erase_if(t, [](const Tensor& x) { return x.name == "model.layers.0.mlp.experts.down_proj"; });
  write_fuel(cfg, t);
  expect_refused({"missing tensor 'model.layers.0.mlp.experts.down_proj' (expected BF16 [4, 32, 32])"});
}

TEST_F(FuelTest, RefusesFusedExpertsInAQuantisedFuel) {
  json cfg = tiny_config(Layout::kText);
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  auto t = manifest_tensors(cfg, WeightFormat::kFP8, Layout::kText);
  std::erase_if(t, [](const Tensor& x) { return x.name.find(".mlp.experts.") != std::string::npos; });
  for (int l = 0; l < 4; ++l) {
    t.push_back({fmt::format("model.layers.{}.mlp.experts.gate_up_proj", l), DType::kF8E4M3, {4, 64, 32}});
    t.push_back({fmt::format("model.layers.{}.mlp.experts.gate_up_proj_scale_inv", l), DType::kF32, {4, 1, 1}});
  }
  write_fuel(cfg, t);
  expect_refused({"'model.layers.0.mlp.experts.gate_up_proj'", "fused routed experts are read from bf16 checkpoints only",
                  "a fp8 checkpoint"});
}

TEST_F(FuelTest, RefusesBlockFp8WeightWithoutItsScale) {
  json cfg = tiny_config(Layout::kText);
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  auto t = manifest_tensors(cfg, WeightFormat::kFP8, Layout::kText);
  std::erase_if(t, [](const Tensor& x) { return x.name == "model.layers.3.self_attn.o_proj.weight_scale_inv"; });
  write_fuel(cfg, t);
  expect_refused({"missing tensor 'model.layers.3.self_attn.o_proj.weight_scale_inv' (expected F32 [1, 1])"});
}

TEST_F(FuelTest, RefusesFp8ModulesDeclaredUnconvertedThatTheEnginesRunInFp8) {
  json cfg = tiny_config(Layout::kText);
  json keep = kFp8Unconverted;
  keep.push_back("self_attn.o_proj");
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}, {"modules_to_not_convert", keep}};
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kFP8, Layout::kText));
  expect_refused({"quantization_config.modules_to_not_convert declares precisions",
                  "layers.*.self_attn.o_proj: declared bf16 (1 modules, e.g. 'model.layers.3.self_attn.o_proj'); the "
                  "engines run it as fp8_block128"});
}

TEST_F(FuelTest, RefusesNvfp4ExclusionsThatDisagreeWithThePrecisionMap) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kNVFP4, Layout::kText));
  auto quant = [&](const json& exclude) {
    write_json(dir_ / "hf_quant_config.json",
               {{"quantization", {{"quant_algo", "NVFP4"}, {"group_size", 16}, {"exclude_modules", exclude}}}});
  };
  // Attention left quantised: no NVFP4 kernel for it.
  quant({"lm_head", "model.layers.*.linear_attn*", "model.layers.*.mlp.gate", "model.layers.*.mlp.shared_expert*"});
  expect_refused({"hf_quant_config.json: quantization.exclude_modules declares precisions",
                  "layers.*.self_attn.q_proj: declared nvfp4 (1 modules, e.g. 'model.layers.3.self_attn.q_proj'); the "
                  "engines run it as bf16"});
  // Routed experts excluded: the engines' experts are NVFP4.
  json all = kNvfp4Exclusions;
  all.push_back("model.layers.*.mlp.experts.*");
  quant(all);
  expect_refused({"layers.*.mlp.experts.*.gate_proj: declared bf16 (16 modules, e.g. 'model.layers.0.mlp.experts.0.gate_proj')"});
  // The same list in config.json's quantization_config.ignore is read the same way.
  fs::remove(dir_ / "hf_quant_config.json");
  cfg["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"ignore", all}};
  write_json(dir_ / "config.json", cfg);
  expect_refused({"config.json: quantization_config.ignore declares precisions", "layers.*.mlp.experts.*.down_proj"});
  cfg["quantization_config"]["ignore"] = kNvfp4Exclusions;
  write_json(dir_ / "config.json", cfg);
  expect_all_tensors(Fuel::open(dir_.string()));
}

TEST_F(FuelTest, RefusesMissingTensorNamingExpectedDtypeAndShape) {
  json cfg = tiny_config(Layout::kText);
  auto t = manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText);
  std::erase_if(t, [](const Tensor& x) { return x.name == "model.layers.2.linear_attn.A_log"; });
  write_fuel(cfg, t);
  expect_refused({"missing tensor 'model.layers.2.linear_attn.A_log'", "expected BF16 [4]", "1 problem"});
}

TEST_F(FuelTest, RefusesExtraTensor) {
  json cfg = tiny_config(Layout::kText);
  auto t = manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText);
  t.push_back({"model.layers.0.mlp.experts.4.up_proj.weight", DType::kBF16, {32, 32}});
  write_fuel(cfg, t, 2);
  expect_refused({"unexpected tensor 'model.layers.0.mlp.experts.4.up_proj.weight'", "model-0000"});
}

TEST_F(FuelTest, RefusesMisshapedTensor) {
  json cfg = tiny_config(Layout::kText);
  auto t = manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText);
  for (auto& x : t)
    if (x.name == "model.layers.3.self_attn.k_proj.weight") x.shape = {16, 32};
  write_fuel(cfg, t);
  expect_refused({"'model.layers.3.self_attn.k_proj.weight'", "expected BF16 [32, 32], found BF16 [16, 32]"});
}

TEST_F(FuelTest, RefusesWrongDtype) {
  json cfg = tiny_config(Layout::kText);
  auto t = manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText);
  for (auto& x : t)
    if (x.name == "model.norm.weight") x.dtype = DType::kF32;
  write_fuel(cfg, t);
  expect_refused({"'model.norm.weight' in model.safetensors", "expected BF16 [32], found F32 [32]"});
}

TEST_F(FuelTest, RefusesBf16TensorsDeclaredNvfp4) {
  json cfg = tiny_config(Layout::kText);
  write_json(dir_ / "hf_quant_config.json", {{"quantization", {{"quant_algo", "NVFP4"}}}});
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText));
  expect_refused({"nvfp4 weights", "expected U8 [32, 16], found BF16 [32, 32]", "and "});
}

TEST_F(FuelTest, RefusesWrongLayoutNamingTheNames) {
  json cfg = tiny_config(Layout::kMultimodal);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText));
  expect_refused({"multimodal layout", "missing tensor 'model.language_model.embed_tokens.weight'"});
}

TEST_F(FuelTest, RefusesUnsupportedQuantisation) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText));
  write_json(dir_ / "hf_quant_config.json", {{"quantization", {{"quant_algo", "W4A8_AWQ"}}}});
  expect_refused({"hf_quant_config.json", "quant_algo 'W4A8_AWQ'"});
  write_json(dir_ / "hf_quant_config.json", {{"quantization", {{"quant_algo", "NVFP4"}, {"kv_cache_quant_algo", "FP8"}}}});
  expect_refused({"kv_cache_quant_algo \"FP8\""});
  fs::remove(dir_ / "hf_quant_config.json");

  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {64, 64}}};
  write_json(dir_ / "config.json", cfg);
  expect_refused({"quantization_config", "weight_block_size [64,64]"});
  cfg["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  write_json(dir_ / "config.json", cfg);
  expect_refused({"quant_method 'gptq'"});
  cfg["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "FP8"}};
  write_json(dir_ / "config.json", cfg);
  expect_refused({"quant_algo 'FP8'"});
}

TEST_F(FuelTest, RefusesContradictoryQuantisationFiles) {
  json cfg = tiny_config(Layout::kText);
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kFP8, Layout::kText));
  write_json(dir_ / "hf_quant_config.json", {{"quantization", {{"quant_algo", "NVFP4"}}}});
  expect_refused({"hf_quant_config.json declares nvfp4 but config.json declares fp8"});
}

TEST_F(FuelTest, RefusesMissingOrMalformedConfig) {
  expect_refused({"config.json: missing"});
  std::ofstream(dir_ / "config.json") << "{\"model_type\": ";
  expect_refused({"config.json: not valid JSON"});
}

TEST_F(FuelTest, RefusesMissingWeights) {
  write_json(dir_ / "config.json", tiny_config(Layout::kText));
  expect_refused({"no model.safetensors.index.json and no model.safetensors"});
}

TEST_F(FuelTest, RefusesIndexNamingAMissingShard) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText), 3);
  fs::remove(dir_ / "model-00002-of-00003.safetensors");
  expect_refused({"model.safetensors.index.json", "shard 'model-00002-of-00003.safetensors'", "does not exist"});
}

TEST_F(FuelTest, RefusesIndexMappingATensorToTheWrongShard) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText), 2);
  json index;
  std::ifstream(dir_ / "model.safetensors.index.json") >> index;
  // embed_tokens is the first tensor, so it sits in shard 1; point the index at shard 2.
  index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
  write_json(dir_ / "model.safetensors.index.json", index);
  expect_refused({"'model.embed_tokens.weight' is mapped to 'model-00002-of-00002.safetensors'",
                  "does not hold it"});
}

TEST_F(FuelTest, RefusesShardTensorMissingFromIndex) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText), 2);
  json index;
  std::ifstream(dir_ / "model.safetensors.index.json") >> index;
  index["weight_map"].erase("model.norm.weight");
  write_json(dir_ / "model.safetensors.index.json", index);
  expect_refused({"tensor 'model.norm.weight' is not listed in model.safetensors.index.json"});
}

TEST_F(FuelTest, RefusesIndexPointingOutsideTheFuel) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText), 2);
  json index;
  std::ifstream(dir_ / "model.safetensors.index.json") >> index;
  index["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
  write_json(dir_ / "model.safetensors.index.json", index);
  expect_refused({"'../elsewhere.safetensors'", "not a file name in the fuel directory"});
}

TEST_F(FuelTest, CorruptShardErrorNamesTheShard) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText), 2);
  fs::resize_file(dir_ / "model-00001-of-00002.safetensors", 4);
  expect_refused({"model-00001-of-00002.safetensors", "shorter than"});
}

TEST_F(FuelTest, TensorRefusesUnknownCanonicalName) {
  json cfg = tiny_config(Layout::kText);
  write_fuel(cfg, manifest_tensors(cfg, WeightFormat::kBF16, Layout::kText));
  Fuel f = Fuel::open(dir_.string());
  try {
    f.tensor("model.layers.0.input_layernorm.weight");  // a checkpoint name, not a canonical one
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'model.layers.0.input_layernorm.weight'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rocket
