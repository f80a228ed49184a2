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

// The side x side table [side·side][dim] resampled to the grid, bilinear with aligned corners (row i of
// h reads table row i·(side-1)/(h-1)), as out [t·h·w][dim] in patch order (every frame the same).
// REQUIRES: side >= 1; h, w >= 1 and multiples of merge.
void interpolate_positions(const float* table, int side, int dim, const ImageGrid& g, int merge, float* out);

// The 2-D rotary of one patch on x [heads][head_dim] in place. With q = head_dim / 4 frequencies
// inv_j = 1 / theta^(2j / (head_dim / 2)), dims i < head_dim / 2 rotate with dim i + head_dim / 2 by
// angle row·inv_i for i < q and col·inv_(i-q) for q <= i < 2q. At (0, 0) it is the identity.
// REQUIRES: head_dim % 4 == 0.
void rotate_2d(float* x, int heads, int head_dim, PatchPosition p, double theta);

}  // namespace rocket::vision
