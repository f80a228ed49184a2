// Where each patch of an image sits, as the vision tower sees it: the order the image processor emits
// patches in, the learned position embedding resampled to the image's grid, and the 2-D rotary
// embedding of its row and column. FP32, reproducing the HF reference's index and weight arithmetic
// (docs/vision-tower.md).
//
// Patch order (Qwen2-VL's image processor, which the tower's reshapes assume): frame by frame; within a
// frame the merge x merge windows row-major, and inside a window its patches row-major. So patch k of
// a frame of w columns sits at
//   window = k / merge², row = (window / (w / merge)) · merge + (k / merge) % merge,
//                        col = (window % (w / merge)) · merge + k % merge,
// and each window's merge² patches are consecutive: the merger concatenates them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rocket::vision {

// One image (or video) as the processor describes it: patches along time, rows and columns
// (`grid_thw`). A still image has t = 1 (its frame fills the temporal patch pair).
struct ImageGrid {
  int t = 1, h = 0, w = 0;
  int64_t patches() const { return int64_t(t) * h * w; }
  bool operator==(const ImageGrid&) const = default;
};

struct PatchPosition {
  int row = 0, col = 0;
  bool operator==(const PatchPosition&) const = default;
};

// The (row, col) of each of one frame's h·w patches, in patch order. REQUIRES: h, w multiples of merge.
std::vector<PatchPosition> patch_positions(const ImageGrid& g, int merge);

// The four table rows one patch's position embedding reads and their weights (bilinear with aligned
// corners: row i of h reads table row i·(side-1)/(h-1)): the embedding is Σ weight[j] · table[row[j]].
struct PositionTaps {
  int row[4] = {};
  float weight[4] = {};
};

// The taps of one frame's h·w patches, in patch order. REQUIRES: side >= 1; h, w >= 1 and multiples of
// merge.
std::vector<PositionTaps> position_taps(const ImageGrid& g, int side, int merge);

// The side x side table [side·side][dim] resampled to the grid (position_taps), as out [t·h·w][dim] in
// patch order (every frame the same). REQUIRES: as position_taps.
void interpolate_positions(const float* table, int side, int dim, const ImageGrid& g, int merge, float* out);

// The 2-D rotary of one patch: with q = head_dim / 4 frequencies inv_j = 1 / theta^(2j / (head_dim / 2)),
// angle row·inv_i for i < q and col·inv_(i-q) for q <= i < 2q; cos_t and sin_t get head_dim / 2 values.
// REQUIRES: head_dim % 4 == 0.
void rotary_2d_table(int head_dim, PatchPosition p, double theta, float* cos_t, float* sin_t);

// The 2-D rotary of one patch on x [heads][head_dim] in place: dims i < head_dim / 2 rotate with dim
// i + head_dim / 2 by rotary_2d_table's angle i. At (0, 0) it is the identity. REQUIRES: head_dim % 4 == 0.
void rotate_2d(float* x, int heads, int head_dim, PatchPosition p, double theta);

// What one tower forward over a list of images needs besides weights and patches, computed once on the
// host (the H200 tower reads it as is, so both forwards use the same taps and angles):
struct TowerLayout {
  int64_t patches = 0;
  std::vector<PositionTaps> taps;  // [patches]: every frame of every image, in patch order
  std::vector<float> cos, sin;     // [patches][head_dim / 2]: rotary_2d_table of each patch
  std::vector<int64_t> frames;     // attention segments: patches [frames[s], frames[s + 1]) (cu_seqlens)
};

// REQUIRES: grids of whole merge windows (Tower::forward checks them first); head_dim % 4 == 0.
TowerLayout tower_layout(std::span<const ImageGrid> grids, int side, int merge, int head_dim, double theta);

}  // namespace rocket::vision
