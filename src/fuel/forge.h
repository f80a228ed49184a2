// Forge: writes a complete checkpoint directory of a named chemistry with deterministic
// pseudo-random weights, in the exact on-disk layouts real checkpoints use (text-only `model.` or
// multimodal `model.language_model.` names with a `text_config`, routed experts per expert or fused,
// sharded safetensors + index, ModelOpt NVFP4 or block-FP8 when asked). Forged fuels stand in for
// real checkpoints, which cannot be downloaded here; the loader reads both through the same code.
// A weight's values depend on the seed and its canonical name only, so one seed forged in every
// layout holds the same weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fuel/checkpoint_layout.h"
#include "fuel/chemistry.h"

namespace rocket {

struct ForgeOptions {
  std::string fuel = "tiny";          // tiny | a3b
  // A BF16 fuel (text layout) whose config, tokenizer and weights are written in `format` instead of
  // a named chemistry's drawn ones: how a trained checkpoint gets its FP8 and NVFP4 forms. Its MTP
  // layer (when its config declares one) is carried in BF16; vision tensors are not.
  std::string from;
  WeightFormat format = WeightFormat::kBF16;
  // Multimodal: a Qwen3_5MoeForConditionalGeneration config with `text_config` and `vision_config`, text
  // weights under `model.language_model.`, the whole vision tower under `model.visual.` (BF16 in every
  // format, as the releases keep it; tiny a small one, a3b the published one: vision_tower.h), and a
  // few MTP tensors when no MTP layer is declared. No engine loads the tower yet.
  Layout layout = Layout::kText;
  ExpertLayout experts = ExpertLayout::kPerExpert;
  uint64_t seed = 1;
  int layers = 0;                     // 0 = the fuel's own depth; otherwise truncate (keeps the 3:1 pattern)
  bool mtp = false;                   // declare and write one MTP layer (manifest.h mtp_manifest), BF16
  std::string out;
  std::string tokenizer_dir;          // holds tokenizer.json + tokenizer_config.json
  uint64_t shard_bytes = 0;           // 0 = the fuel's default
  bool force = false;
  // Only config.json, hf_quant_config.json, generation_config.json and the tokenizer files: what
  // `rocket build --no-weights` plans and compiles an engine from, without forging the tensors.
  bool config_only = false;
  // A biased router, for tests of the co-activation profile and placement: every MoE layer's router
  // routes each token to exactly one of these groups of experts (all of it, so its experts are
  // chosen together), and never to an expert outside them. Group g's router rows are ±(a direction
  // of its own axis g/2; + for even g), every other row zero: a token's winning group is the one its
  // hidden state projects on most, and its members tie with each other above everything else.
  // Groups come in pairs (an axis and its opposite, so some group wins every token); each holds
  // 1..top_k distinct experts; empty: the usual random routers.
  std::vector<std::vector<int>> router_groups;
};

// "0,1,2,3;4,5,6,7" -> {{0,1,2,3},{4,5,6,7}}; Error naming the bad group.
std::vector<std::vector<int>> parse_router_groups(const std::string& text);

// The config.json a fuel of this name is forged with (text-only layout).
nlohmann::json forge_config(const std::string& fuel, int layers);

// Writes the checkpoint directory atomically (temp dir + rename). Error on bad options.
void forge(const ForgeOptions& opt);

}  // namespace rocket
