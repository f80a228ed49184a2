// Forge: writes a complete checkpoint directory of a named chemistry with deterministic
// pseudo-random weights, in the exact on-disk layout real checkpoints use (HF text-only layout,
// sharded safetensors + index, ModelOpt NVFP4 or block-FP8 when asked). Forged fuels stand in for
// real checkpoints, which cannot be downloaded here; the loader reads both through the same code.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "fuel/chemistry.h"

namespace rocket {

struct ForgeOptions {
  std::string fuel = "tiny";          // tiny | a3b
  WeightFormat format = WeightFormat::kBF16;
  uint64_t seed = 1;
  int layers = 0;                     // 0 = the fuel's own depth; otherwise truncate (keeps the 3:1 pattern)
  std::string out;
  std::string tokenizer_dir;          // holds tokenizer.json + tokenizer_config.json
  uint64_t shard_bytes = 0;           // 0 = the fuel's default
  bool force = false;
  // Only config.json, hf_quant_config.json, generation_config.json and the tokenizer files: what
  // `rocket build --no-weights` plans and compiles an engine from, without forging the tensors.
  bool config_only = false;
};

// The config.json a fuel of this name is forged with (text-only layout).
nlohmann::json forge_config(const std::string& fuel, int layers);

// Writes the checkpoint directory atomically (temp dir + rename). Error on bad options.
void forge(const ForgeOptions& opt);

}  // namespace rocket
