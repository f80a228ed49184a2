// The host side of vision_tower_check (compiled by g++: the host reference pulls in fmt, which nvcc
// cannot compile): a tower of random BF16 weights of a given shape, and vision::Tower's forward over it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace rocket::check {

struct TowerShapeDesc {
  int depth = 0, hidden = 0, heads = 0, intermediate = 0, out_hidden = 0, position_embeddings = 0;
  std::string hidden_act = "gelu_pytorch_tanh";
};

// Every tensor of vision_tower_manifest for the shape, in its order, BF16 bits drawn from `seed`:
// linears uniform within ±sqrt(3 / fan_in) (unit-variance outputs), biases ±0.02, LayerNorm weights
// 1 ± 0.1 and biases ±0.05, the position table ±0.5.
struct RandomTower {
  std::vector<std::string> names;
  std::vector<std::vector<uint16_t>> bits;
  const std::vector<uint16_t>& at(const std::string& name) const;
};
RandomTower random_tower(const TowerShapeDesc& shape, uint32_t seed);

// The TowerLayout of the grids ([t, h, w] each), flattened for upload.
struct FlatLayout {
  std::vector<int32_t> tap_rows;     // [patches][4]
  std::vector<float> tap_weights;    // [patches][4]
  std::vector<float> cos, sin;       // [patches][head_dim / 2]
  std::vector<int64_t> frames;
};
FlatLayout flat_layout(const TowerShapeDesc& shape, const std::vector<std::array<int, 3>>& grids);

// vision::Tower::forward over the random tower: hidden [patches][hidden], merged [patches / 4][out_hidden].
struct ReferenceOut {
  std::vector<float> hidden, merged;
};
ReferenceOut reference_forward(const TowerShapeDesc& shape, const RandomTower& tower, const std::vector<float>& patches,
                               const std::vector<std::array<int, 3>>& grids);

}  // namespace rocket::check
