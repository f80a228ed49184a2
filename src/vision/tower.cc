#include "vision/tower.h"

#include <algorithm>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/host/activations.h"
#include "kernels/host/attention.h"
#include "kernels/host/dense.h"
#include "kernels/host/layer_norm.h"

namespace rocket::vision {

namespace {

const VisionTowerConfig& tower_of(const Fuel& fuel) {
  if (!fuel.vision()) fail("{}: holds no vision tower (no vision_config, or no model.visual. tensors)", fuel.dir());
  return *fuel.vision();
}

}  // namespace

// The fuel has checked every tensor's dtype and shape against vision_tower_manifest.
Tower::Tower(const Fuel& fuel) : Tower(tower_of(fuel), [&](const std::string& n) { return fuel.tensor(n).data; }) {}

Tower::Tower(const VisionTowerConfig& config, const std::function<const uint8_t*(const std::string&)>& tensor) {
  config_ = config;
  auto bf16 = [&](const std::string& name) { return reinterpret_cast<const uint16_t*>(tensor(name)); };
  auto linear = [&](const std::string& base, int64_t rows, int64_t cols) {
    return Linear{host::WeightView{.precision = Precision::kBF16, .rows = rows, .cols = cols,
                                   .data = tensor(base + ".weight")},
                  bf16(base + ".bias")};
  };
  auto norm = [&](const std::string& base) { return Norm{bf16(base + ".weight"), bf16(base + ".bias")}; };
  const int64_t h = config_.hidden;
  patch_embed_ = linear("visual.patch_embed.proj", h, config_.patch_dim());
  const uint16_t* table = bf16("visual.pos_embed.weight");
  positions_.resize(size_t(config_.position_embeddings) * size_t(h));
  for (size_t i = 0; i < positions_.size(); ++i) positions_[i] = bf16_to_f32(table[i]);
  for (int b = 0; b < config_.depth; ++b) {
    const std::string p = "visual.blocks." + std::to_string(b) + ".";
    blocks_.push_back(Block{.norm1 = norm(p + "norm1"), .norm2 = norm(p + "norm2"),
                            .qkv = linear(p + "attn.qkv", 3 * h, h), .proj = linear(p + "attn.proj", h, h),
                            .fc1 = linear(p + "mlp.linear_fc1", config_.intermediate, h),
                            .fc2 = linear(p + "mlp.linear_fc2", h, config_.intermediate)});
  }
  merger_norm_ = norm("visual.merger.norm");
  merger_fc1_ = linear("visual.merger.linear_fc1", config_.merged_dim(), config_.merged_dim());
  merger_fc2_ = linear("visual.merger.linear_fc2", config_.out_hidden, config_.merged_dim());
}

void Tower::apply(const Linear& l, const float* x, int64_t n, float* y) {
  host::linear(l.w, x, int(n), y);
  const int64_t rows = l.w.rows;
#pragma omp parallel for schedule(static) if (n * rows >= (int64_t(1) << 16))
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) y[t * rows + r] += bf16_to_f32(l.b[r]);
}

TowerOutput Tower::forward(std::span<const float> patches, std::span<const ImageGrid> grids) const {
  const VisionTowerConfig& c = config_;
  const int merge = c.merge, h = c.hidden, heads = c.heads, hd = c.head_dim();
  int64_t n = 0;
  for (size_t i = 0; i < grids.size(); ++i) {
    const ImageGrid& g = grids[i];
    if (g.t < 1 || g.h < 1 || g.w < 1 || g.h % merge || g.w % merge)
      fail("vision tower: image {}: grid t={} h={} w={} is not whole {}x{} merge windows", i, g.t, g.h, g.w, merge, merge);
    n += g.patches();
  }
  if (grids.empty() || int64_t(patches.size()) != n * c.patch_dim())
    fail("vision tower: {} values of patches for {} image(s) of {} patches x {} values", patches.size(), grids.size(), n,
         c.patch_dim());

  // Patch embedding, then each patch's learned position (tower_layout: the table's taps, the rotary
  // angles, and the frames attention runs over: the reference's cu_seqlens).
  std::vector<float> x(size_t(n * h));
  apply(patch_embed_, patches.data(), n, x.data());
  const TowerLayout layout = tower_layout(grids, c.grid_side(), merge, hd, c.rope_theta);
  const std::vector<int64_t>& frames = layout.frames;
#pragma omp parallel for schedule(static) if (n * h >= (int64_t(1) << 15))
  for (int64_t t = 0; t < n; ++t) {
    const PositionTaps& p = layout.taps[size_t(t)];
    const float* t0 = positions_.data() + int64_t(p.row[0]) * h;
    const float* t1 = positions_.data() + int64_t(p.row[1]) * h;
    const float* t2 = positions_.data() + int64_t(p.row[2]) * h;
    const float* t3 = positions_.data() + int64_t(p.row[3]) * h;
    float* o = x.data() + t * h;
    for (int d = 0; d < h; ++d) o[d] += p.weight[0] * t0[d] + p.weight[1] * t1[d] + p.weight[2] * t2[d] + p.weight[3] * t3[d];
  }

  std::vector<float> y(size_t(n * h)), qkv(size_t(n * 3 * h)), q(size_t(n * h)), k(size_t(n * h)), v(size_t(n * h)),
      attn(size_t(n * h)), mid(size_t(n * c.intermediate));
  auto layer_norm_rows = [&](const Norm& norm, const float* in, float* out) {
#pragma omp parallel for schedule(static) if (n * h >= (int64_t(1) << 15))
    for (int64_t t = 0; t < n; ++t) host::layer_norm(in + t * h, norm.w, norm.b, h, kTowerNormEps, out + t * h);
  };
  for (const Block& b : blocks_) {
    layer_norm_rows(b.norm1, x.data(), y.data());
    apply(b.qkv, y.data(), n, qkv.data());
    // qkv's row is [q | k | v], each [heads][head_dim] (the reference's reshape(n, 3, heads, -1)).
#pragma omp parallel for schedule(static) if (n * h >= (int64_t(1) << 15))
    for (int64_t t = 0; t < n; ++t) {
      const float* row = qkv.data() + t * 3 * h;
      std::copy(row, row + h, q.data() + t * h);
      std::copy(row + h, row + 2 * h, k.data() + t * h);
      std::copy(row + 2 * h, row + 3 * h, v.data() + t * h);
      const float* cos_t = layout.cos.data() + t * (hd / 2);
      const float* sin_t = layout.sin.data() + t * (hd / 2);
      host::rotate_half_pairs(q.data() + t * h, heads, hd, hd / 2, cos_t, sin_t);
      host::rotate_half_pairs(k.data() + t * h, heads, hd, hd / 2, cos_t, sin_t);
    }
    for (size_t s = 0; s + 1 < frames.size(); ++s) {
      const int64_t begin = frames[s], len = frames[s + 1] - begin;
#pragma omp parallel for schedule(static) if (len * len * h >= (int64_t(1) << 15))
      for (int64_t t = begin; t < begin + len; ++t)
        host::attention_decode(q.data() + t * h, k.data() + begin * h, v.data() + begin * h, int(len), heads, heads, hd,
                               attn.data() + t * h);
    }
    apply(b.proj, attn.data(), n, y.data());
    for (int64_t i = 0; i < n * h; ++i) x[size_t(i)] += y[size_t(i)];

    layer_norm_rows(b.norm2, x.data(), y.data());
    apply(b.fc1, y.data(), n, mid.data());
    const bool tanh_gelu = c.hidden_act == "gelu_pytorch_tanh";
    for (float& m : mid) m = tanh_gelu ? host::gelu_tanh(m) : host::gelu_erf(m);
    apply(b.fc2, mid.data(), n, y.data());
    for (int64_t i = 0; i < n * h; ++i) x[size_t(i)] += y[size_t(i)];
  }

  // The merger normalises each patch, then reads merge² consecutive patches as one row of merged_dim:
  // the processor's order makes those a window.
  TowerOutput out;
  const int64_t tokens = n / (int64_t(merge) * merge);
  layer_norm_rows(merger_norm_, x.data(), y.data());
  std::vector<float> wide(size_t(tokens * c.merged_dim()));
  apply(merger_fc1_, y.data(), tokens, wide.data());
  for (float& m : wide) m = host::gelu_erf(m);
  out.merged.resize(size_t(tokens * c.out_hidden));
  apply(merger_fc2_, wide.data(), tokens, out.merged.data());
  out.hidden = std::move(x);
  return out;
}

}  // namespace rocket::vision
