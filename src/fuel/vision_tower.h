// The vision tower of a multimodal qwen3_5_moe checkpoint: its shapes, as the config's `vision_config`
// declares them, and its tensors, as the official releases store them under `model.visual.`
// (docs/vision-tower.md). Read by the fuel loader (which checks the tensors), written by forge, and
// run by the host reference forward (src/vision/tower.h); a plan carries it (plan/plan_vision.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fuel/manifest.h"

namespace rocket {

struct VisionTowerConfig {
  int depth = 0;                 // vision blocks
  int hidden = 0;                // hidden_size
  int heads = 0;                 // num_heads
  int intermediate = 0;          // intermediate_size of each block's MLP
  int in_channels = 3;
  int patch = 16;                // patch_size (pixels per side)
  int temporal_patch = 2;        // temporal_patch_size (frames per patch; a still image repeats its frame)
  int merge = 2;                 // spatial_merge_size: merge x merge patches become one text token
  int out_hidden = 0;            // out_hidden_size: the text model's hidden size
  int position_embeddings = 0;   // num_position_embeddings: a square grid of learned positions
  std::string hidden_act;        // the blocks' MLP activation: "gelu_pytorch_tanh" or "gelu"
  double rope_theta = 10000.0;   // the 2-D rotary base (rope_parameters.rope_theta when present)

  int head_dim() const { return hidden / heads; }
  int patch_dim() const { return in_channels * temporal_patch * patch * patch; }  // values per patch
  int merged_dim() const { return hidden * merge * merge; }                      // the merger's width
  int grid_side() const;         // sqrt(position_embeddings)

  // Error naming the field for shapes the reference cannot build or the forward does not run.
  void validate(const std::string& path) const;
  // The `vision_config` object HF reads (Qwen3_5MoeVisionConfig's fields), as the releases write it.
  nlohmann::json to_json() const;
};

// The tower a config.json declares (`vision_config` of a multimodal config); nullopt when it declares
// none. Error naming the field on a malformed or unsupported declaration (a DeepStack tower, an
// activation the forward does not implement, a grid that is not square).
std::optional<VisionTowerConfig> vision_tower_config(const nlohmann::json& config, const std::string& path);

// Every tensor of the tower, BF16 in every weight format (the -FP8 and NVFP4 releases keep
// `model.visual` unquantised), in a fixed order. Canonical names start with `visual.` and are stored
// as `model.visual.` (checkpoint_name). The patch embedding (a Conv3d with stride = kernel) is listed
// as a linear [hidden, patch_dim] over a flattened patch, its checkpoint shape the 5-D kernel.
std::vector<TensorSpec> vision_tower_manifest(const VisionTowerConfig& v);

}  // namespace rocket
