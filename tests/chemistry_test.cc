#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuel/chemistry.h"
#include "fuel/manifest.h"

namespace rocket {
namespace {

nlohmann::json a3b_text_config() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text",
    "vocab_size": 248320, "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "hidden_act": "silu", "rms_norm_eps": 1e-6,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "num_experts_per_tok": 8, "num_experts": 256,
    "tie_word_embeddings": false, "max_position_embeddings": 32768,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25}})");
}

TEST(Chemistry, ParsesTextConfigWithDefaultLayerPattern) {
  Chemistry c = chemistry_from_config(a3b_text_config(), WeightFormat::kNVFP4, "config.json");
  EXPECT_EQ(c.layers, 40);
  EXPECT_EQ(c.full_layers(), 10);
  EXPECT_EQ(c.layer_types[3], LayerKind::kFullAttention);
  EXPECT_EQ(c.layer_types[0], LayerKind::kLinearAttention);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_EQ(c.conv_dim(), 2 * 16 * 128 + 32 * 128);
  EXPECT_EQ(c.precision(Role::kExperts), Precision::kNVFP4);
  EXPECT_EQ(c.precision(Role::kAttnProj), Precision::kBF16);
}

TEST(Chemistry, MultimodalLayoutReadsTextConfig) {
  nlohmann::json outer = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}, {"model_type", "qwen3_5_moe"},
                          {"text_config", a3b_text_config()}};
  Chemistry a = chemistry_from_config(outer, WeightFormat::kBF16, "config.json");
  Chemistry b = chemistry_from_config(a3b_text_config(), WeightFormat::kBF16, "config.json");
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
}

TEST(Chemistry, FingerprintCoversShapesAndFormat) {
  Chemistry base = chemistry_from_config(a3b_text_config(), WeightFormat::kBF16, "c");
  Chemistry other_format = chemistry_from_config(a3b_text_config(), WeightFormat::kNVFP4, "c");
  auto cfg = a3b_text_config();
  cfg["moe_intermediate_size"] = 768;
  Chemistry other_shape = chemistry_from_config(cfg, WeightFormat::kBF16, "c");
  EXPECT_NE(base.fingerprint(), other_format.fingerprint());
  EXPECT_NE(base.fingerprint(), other_shape.fingerprint());
  EXPECT_EQ(base.fingerprint(), chemistry_from_json(base.to_json()).fingerprint());
}

TEST(Chemistry, RefusesUnknownArchitectureByName) {
  auto cfg = a3b_text_config();
  cfg["architectures"] = {"LlamaForCausalLM"};
  cfg["model_type"] = "llama";
  try {
    chemistry_from_config(cfg, WeightFormat::kBF16, "x/config.json");
    FAIL() << "accepted llama";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LlamaForCausalLM"), std::string::npos) << e.what();
  }
}

TEST(Chemistry, RefusesInconsistentShapesNamingTheField) {
  auto cfg = a3b_text_config();
  cfg["num_key_value_heads"] = 3;
  try {
    chemistry_from_config(cfg, WeightFormat::kBF16, "config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads"), std::string::npos) << e.what();
  }
}

TEST(Manifest, NamesMatchHubCheckpoints) {
  Chemistry c = chemistry_from_config(a3b_text_config(), WeightFormat::kNVFP4, "c");
  auto m = fuel_manifest(c);
  auto find = [&](const std::string& n) {
    for (const auto& t : m) if (t.name == n) return &t;
    return static_cast<const TensorSpec*>(nullptr);
  };
  ASSERT_TRUE(find("layers.0.linear_attn.in_proj_qkv.weight"));
  ASSERT_TRUE(find("layers.3.self_attn.q_proj.weight"));
  const TensorSpec* w = find("layers.1.mlp.experts.255.down_proj.weight");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->dtype, DType::kU8);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2048, 256}));
  const TensorSpec* s = find("layers.1.mlp.experts.255.down_proj.weight_scale");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->shape, (std::vector<int64_t>{2048, 32}));
  EXPECT_EQ(checkpoint_name("layers.0.mlp.gate.weight", Layout::kMultimodal),
            "model.language_model.layers.0.mlp.gate.weight");
  EXPECT_EQ(checkpoint_name("lm_head.weight", Layout::kMultimodal), "lm_head.weight");
  // a3b sizes from docs/chemistry.md: 34.7 B parameters, experts 32.2 B.
  double params = 0;
  for (auto& t : m) if (t.part == Part::kWeight || t.part == Part::kPlain) params += double(t.rows ? t.rows * t.cols : t.nbytes() / 2);
  EXPECT_NEAR(params / 1e9, 34.7, 0.2);
}

}  // namespace
}  // namespace rocket
