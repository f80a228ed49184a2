#include "vision_tower_reference.h"

#include <cmath>
#include <random>

#include "core/dtype.h"
#include "core/error.h"
#include "fuel/vision_tower.h"
#include "vision/tower.h"
#include "vision/tower_positions.h"

namespace rocket::check {

namespace {

VisionTowerConfig config_of(const TowerShapeDesc& s) {
  VisionTowerConfig c;
  c.depth = s.depth;
  c.hidden = s.hidden;
  c.heads = s.heads;
  c.intermediate = s.intermediate;
  c.out_hidden = s.out_hidden;
  c.position_embeddings = s.position_embeddings;
  c.hidden_act = s.hidden_act;
  return c;
}

std::vector<vision::ImageGrid> grids_of(const std::vector<std::array<int, 3>>& grids) {
  std::vector<vision::ImageGrid> out;
  for (const auto& g : grids) out.push_back(vision::ImageGrid{g[0], g[1], g[2]});
  return out;
}

}  // namespace

const std::vector<uint16_t>& RandomTower::at(const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return bits[i];
  fail("random tower: no tensor {}", name);
}

RandomTower random_tower(const TowerShapeDesc& shape, uint32_t seed) {
  RandomTower t;
  std::mt19937 rng(seed);
  for (const TensorSpec& spec : vision_tower_manifest(config_of(shape))) {
    int64_t count = 1;
    for (int64_t d : spec.shape) count *= d;
    const bool weight = spec.part == Part::kWeight;
    const bool norm = spec.name.find("norm") != std::string::npos;
    const bool bias = spec.name.ends_with(".bias");
    float lo = -0.02f, hi = 0.02f;
    if (weight) hi = std::sqrt(3.0f / float(spec.cols)), lo = -hi;
    else if (norm && !bias) lo = 0.9f, hi = 1.1f;
    else if (norm) lo = -0.05f, hi = 0.05f;
    else if (spec.name.find("pos_embed") != std::string::npos) lo = -0.5f, hi = 0.5f;
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<uint16_t> bits(static_cast<size_t>(count));
    for (uint16_t& b : bits) b = f32_to_bf16(u(rng));
    t.names.push_back(spec.name);
    t.bits.push_back(std::move(bits));
  }
  return t;
}

FlatLayout flat_layout(const TowerShapeDesc& shape, const std::vector<std::array<int, 3>>& grids) {
  const VisionTowerConfig c = config_of(shape);
  const std::vector<vision::ImageGrid> g = grids_of(grids);
  const vision::TowerLayout l = vision::tower_layout(g, c.grid_side(), c.merge, c.head_dim(), c.rope_theta);
  FlatLayout f;
  for (const vision::PositionTaps& t : l.taps)
    for (int j = 0; j < 4; ++j) f.tap_rows.push_back(t.row[j]), f.tap_weights.push_back(t.weight[j]);
  f.cos = l.cos;
  f.sin = l.sin;
  f.frames = l.frames;
  return f;
}

ReferenceOut reference_forward(const TowerShapeDesc& shape, const RandomTower& tower, const std::vector<float>& patches,
                               const std::vector<std::array<int, 3>>& grids) {
  const vision::Tower t(config_of(shape), [&](const std::string& name) {
    return reinterpret_cast<const uint8_t*>(tower.at(name).data());
  });
  const std::vector<vision::ImageGrid> g = grids_of(grids);
  vision::TowerOutput out = t.forward(patches, g);
  return ReferenceOut{std::move(out.hidden), std::move(out.merged)};
}

}  // namespace rocket::check
