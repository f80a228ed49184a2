// Chemistry: a model's architecture, every shape that shapes computation, and its weight format
// (the per-role precision map). Parsed from a fuel's config.json; fingerprinted; the plan records it
// and launch refuses an engine whose chemistry differs from the fuel's.
#pragma once

#include <array>
#include <optional>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rocket {

enum class LayerKind : uint8_t { kLinearAttention, kFullAttention };

// How a weight tensor is stored in the fuel (and, for now, in the conditioned blob).
enum class Precision : uint8_t {
  kBF16,      // plain bf16
  kFP8Block,  // e4m3 weight + fp32 `weight_scale_inv` per 128x128 block (DeepSeek/Qwen FP8 layout)
  kNVFP4,     // ModelOpt NVFP4: packed e2m1 `weight`, e4m3 `weight_scale` per 16 along K,
              // fp32 `weight_scale_2` (global) and `input_scale`
};

enum class WeightFormat : uint8_t { kBF16, kFP8, kNVFP4 };

const char* precision_name(Precision p);
// "bf16" | "fp8" (block-128) | "nvfp4", also precision_name's spellings; Error otherwise.
Precision parse_precision(const std::string& s);
const char* format_name(WeightFormat f);
WeightFormat parse_format(const std::string& s);  // "bf16" | "fp8" | "nvfp4", Error otherwise

// The weight roles whose precision a format decides. Norms, conv, A_log and dt_bias are always bf16.
enum class Role : uint8_t {
  kEmbed, kLmHead, kAttnProj, kGdnProj, kGdnGate, kRouter, kSharedExpert, kSharedExpertGate, kExperts,
  kCount
};
const char* role_name(Role r);
Role parse_role(const std::string& s);  // role_name's spellings; Error listing them otherwise

// What a checkpoint of `format` stores each role in (ModelOpt NVFP4: the routed experts; block FP8:
// the large projections).
Precision format_precision(WeightFormat format, Role r);

struct Chemistry {
  std::string architecture = "qwen3_5_moe";
  int vocab = 0, hidden = 0, layers = 0;
  std::vector<LayerKind> layer_types;
  // Gated full attention.
  int heads = 0, kv_heads = 0, head_dim = 0, rotary_dim = 0;
  double partial_rotary_factor = 0, rope_theta = 0;
  // Gated DeltaNet.
  int lin_k_heads = 0, lin_v_heads = 0, lin_k_dim = 0, lin_v_dim = 0, conv_kernel = 0;
  // MoE.
  int experts = 0, top_k = 0, moe_inter = 0, shared_inter = 0;
  double norm_eps = 0;
  bool tie_embeddings = false;
  int max_positions = 0;
  int mtp_layers = 0;  // `mtp_num_hidden_layers`: the draft layers the checkpoint stores (manifest.h)
  WeightFormat format = WeightFormat::kBF16;  // how the checkpoint stores its weights
  // The precision map: a role the plan keeps in another precision than its format stores it in
  // (`rocket build --precision`, converted from BF16 when conditioning); empty: the format's.
  std::array<std::optional<Precision>, size_t(Role::kCount)> precision_overrides{};

  Precision precision(Role r) const;
  int full_layers() const;
  int linear_layers() const;
  int key_dim() const { return lin_k_heads * lin_k_dim; }
  int value_dim() const { return lin_v_heads * lin_v_dim; }
  int conv_dim() const { return 2 * key_dim() + value_dim(); }

  // Stable 64-bit hash of everything above, rendered as 16 hex digits. Independent of weight values.
  std::string fingerprint() const;
  nlohmann::json to_json() const;
  // Checks the invariants the kernels rely on (divisibility, GQA ratio, ...); Error naming the field.
  void validate() const;
};

// "experts=nvfp4,attn_proj=fp8_block128": every role not in BF16, in role order, or "all bf16" (how
// a gate report and the build name a precision map).
std::string quantised_roles(const Chemistry& chem);

// Parses a config.json (text-only `qwen3_5_moe_text` or multimodal `qwen3_5_moe` with `text_config`),
// plus the weight format read from the checkpoint's quantization files. Error names the field.
Chemistry chemistry_from_config(const nlohmann::json& config, WeightFormat format, const std::string& path);
Chemistry chemistry_from_json(const nlohmann::json& j);  // inverse of to_json (plan files)

}  // namespace rocket
