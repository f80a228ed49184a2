#include "vision/tower_positions.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/host/attention.h"

namespace rocket::vision {

std::vector<PatchPosition> patch_positions(const ImageGrid& g, int merge) {
  CHECK(merge >= 1 && g.h >= 1 && g.w >= 1 && g.h % merge == 0 && g.w % merge == 0,
        "a grid of whole merge windows");
  const int windows_per_row = g.w / merge, unit = merge * merge;
  std::vector<PatchPosition> out(size_t(g.h) * size_t(g.w));
  for (size_t k = 0; k < out.size(); ++k) {
    const int window = int(k) / unit, in_window = int(k) % unit;
    out[k] = {(window / windows_per_row) * merge + in_window / merge, (window % windows_per_row) * merge + in_window % merge};
  }
  return out;
}

namespace {

// One axis of the bilinear resampling: the two table indices a grid index reads and their weights.
// NOTE: the source coordinate in fp32, as the reference computes it (i · (side-1) / (n-1), n = 1 reading
// index 0), so that weights agree with it to the last bit where they can.
struct AxisTaps {
  int lo = 0, hi = 0;
  float w_lo = 1, w_hi = 0;
};

AxisTaps axis_taps(int i, int n, int side) {
  const float src = float(i) * float(side - 1) / float(std::max(n - 1, 1));
  const float floor = std::floor(src);
  const float frac = src - floor;
  AxisTaps a;
  a.lo = std::min(int(floor), side - 1);
  a.hi = std::min(a.lo + 1, side - 1);
  a.w_lo = 1.0f - frac;
  a.w_hi = frac;
  return a;
}

}  // namespace

std::vector<PositionTaps> position_taps(const ImageGrid& g, int side, int merge) {
  CHECK(side >= 1 && g.t >= 1, "a table and a grid");
  const std::vector<PatchPosition> where = patch_positions(g, merge);
  std::vector<PositionTaps> out(where.size());
  for (size_t k = 0; k < where.size(); ++k) {
    const AxisTaps r = axis_taps(where[k].row, g.h, side), c = axis_taps(where[k].col, g.w, side);
    out[k] = PositionTaps{.row = {r.lo * side + c.lo, r.lo * side + c.hi, r.hi * side + c.lo, r.hi * side + c.hi},
                          .weight = {r.w_lo * c.w_lo, r.w_lo * c.w_hi, r.w_hi * c.w_lo, r.w_hi * c.w_hi}};
  }
  return out;
}

void interpolate_positions(const float* table, int side, int dim, const ImageGrid& g, int merge, float* out) {
  CHECK(dim >= 1, "a table of at least one column");
  const std::vector<PositionTaps> taps = position_taps(g, side, merge);
  const int64_t frame = int64_t(taps.size()) * dim;
  for (size_t k = 0; k < taps.size(); ++k) {
    const PositionTaps& p = taps[k];
    const float* t00 = table + int64_t(p.row[0]) * dim;
    const float* t01 = table + int64_t(p.row[1]) * dim;
    const float* t10 = table + int64_t(p.row[2]) * dim;
    const float* t11 = table + int64_t(p.row[3]) * dim;
    float* o = out + int64_t(k) * dim;
    for (int d = 0; d < dim; ++d)
      o[d] = p.weight[0] * t00[d] + p.weight[1] * t01[d] + p.weight[2] * t10[d] + p.weight[3] * t11[d];
  }
  for (int f = 1; f < g.t; ++f) std::copy(out, out + frame, out + f * frame);
}

void rotary_2d_table(int head_dim, PatchPosition p, double theta, float* cos_t, float* sin_t) {
  CHECK(head_dim % 4 == 0, "the 2-D rotary splits a head in quarters");
  const int half = head_dim / 2, quarter = head_dim / 4;
  // torch: inv_freq = 1.0 / (theta ** (arange(0, dim, 2, float32) / dim)) with dim = head_dim / 2, then
  // angle = float(position) * inv_freq, all fp32; rows take the first quarter, columns the second.
  const float base = float(theta);
  for (int j = 0; j < quarter; ++j) {
    const float inv_freq = 1.0f / std::pow(base, float(2 * j) / float(half));
    const float row = float(p.row) * inv_freq, col = float(p.col) * inv_freq;
    cos_t[j] = std::cos(row);
    sin_t[j] = std::sin(row);
    cos_t[quarter + j] = std::cos(col);
    sin_t[quarter + j] = std::sin(col);
  }
}

void rotate_2d(float* x, int heads, int head_dim, PatchPosition p, double theta) {
  thread_local std::vector<float> cs;
  if (cs.size() < size_t(head_dim)) cs.resize(size_t(head_dim));
  rotary_2d_table(head_dim, p, theta, cs.data(), cs.data() + head_dim / 2);
  host::rotate_half_pairs(x, heads, head_dim, head_dim / 2, cs.data(), cs.data() + head_dim / 2);
}

TowerLayout tower_layout(std::span<const ImageGrid> grids, int side, int merge, int head_dim, double theta) {
  TowerLayout l;
  for (const ImageGrid& g : grids) l.patches += g.patches();
  const int half = head_dim / 2;
  l.taps.reserve(size_t(l.patches));
  l.cos.resize(size_t(l.patches * half));
  l.sin.resize(size_t(l.patches * half));
  l.frames = {0};
  int64_t at = 0;
  for (const ImageGrid& g : grids) {
    const std::vector<PositionTaps> taps = position_taps(g, side, merge);
    const std::vector<PatchPosition> where = patch_positions(g, merge);
    for (int f = 0; f < g.t; ++f) {
      l.taps.insert(l.taps.end(), taps.begin(), taps.end());
      for (const PatchPosition& p : where) {
        rotary_2d_table(head_dim, p, theta, l.cos.data() + at * half, l.sin.data() + at * half);
        ++at;
      }
      l.frames.push_back(at);
    }
  }
  return l;
}

}  // namespace rocket::vision
