// The vision tower's host reference forward: an image's preprocessed patches to the merged image
// embeddings the text model takes in place of its image tokens, computed as the HF reference
// (Qwen3_5MoeVisionModel) computes them, in FP32 on the fuel's BF16 weights. The parity oracle for the
// tower on the host booster and the definition the H200 kernels will be checked against
// (docs/vision-tower.md).
//
//   patch embedding   a linear over each flattened patch (the Conv3d with stride = kernel), + bias
//   + positions       the learned table resampled to the image's grid (tower_positions.h)
//   blocks × depth    x += proj(attention(rotary(qkv(LN1(x))))); x += fc2(act(fc1(LN2(x))))
//                     attention is bidirectional within each frame of each image, never across
//   merger            LN(x) per patch, merge² consecutive patches concatenated, fc2(GELU(fc1(·)))
//
// Immutable after construction; forward may run from several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "fuel/fuel.h"
#include "kernels/host/weights.h"
#include "vision/tower_positions.h"

namespace rocket::vision {

// LayerNorm epsilon of every norm in the tower: the reference hard-codes it, the config has no field.
constexpr float kTowerNormEps = 1e-6f;

struct TowerOutput {
  std::vector<float> hidden;  // [patches][hidden]: the last block's output, before the merger
  std::vector<float> merged;  // [patches / merge²][out_hidden]: what the text model receives
};

class Tower {
 public:
  // Views into `fuel`, which must outlive the tower. Error when the fuel holds no vision tower.
  explicit Tower(const Fuel& fuel);
  // Views into the bytes `tensor` returns for each canonical name of vision_tower_manifest(config)
  // (a plan's blob: plan_vision.h), which must outlive the tower and hold those tensors' BF16 bytes.
  Tower(const VisionTowerConfig& config, const std::function<const uint8_t*(const std::string&)>& tensor);

  const VisionTowerConfig& config() const { return config_; }

  // patches [Σ grids' t·h·w][patch_dim] in the processor's order (tower_positions.h), images one after
  // another as `grids` lists them. Error naming the image when a grid is empty or not whole merge
  // windows, or when the patch count does not match the grids.
  TowerOutput forward(std::span<const float> patches, std::span<const ImageGrid> grids) const;

 private:
  struct Norm {
    const uint16_t* w = nullptr;
    const uint16_t* b = nullptr;
  };
  struct Linear {
    host::WeightView w;
    const uint16_t* b = nullptr;
  };
  struct Block {
    Norm norm1, norm2;
    Linear qkv, proj, fc1, fc2;
  };

  // y [n][rows] = W x + b.
  static void apply(const Linear& l, const float* x, int64_t n, float* y);

  VisionTowerConfig config_;
  Linear patch_embed_;
  std::vector<float> positions_;  // the learned table [side·side][hidden], read once as fp32
  std::vector<Block> blocks_;
  Norm merger_norm_;
  Linear merger_fc1_, merger_fc2_;
};

}  // namespace rocket::vision
