// The HF reference's image processor for Qwen3-VL-shaped towers (Qwen3.5, Qwen3.6), on one still
// image: `Qwen2VLImageProcessor` (transformers 5.x, torchvision backend) with the releases'
// preprocessor_config.json. Its steps, each exactly (docs/images.md gives the sources):
//
//   1. smart_resize: a size divisible by patch × merge (32) within [min_pixels, max_pixels],
//      keeping the aspect ratio as closely as rounding allows; over 200:1 is refused;
//   2. bicubic antialiased resize to it (image_resize.h);
//   3. rescale by 1/255 and normalise by mean and std, fused as the torchvision backend fuses them:
//      (x - mean/rescale) / (std/rescale) in float32;
//   4. the still image repeated to temporal_patch_size frames (grid_t = 1);
//   5. patches flattened to [grid_t·grid_h·grid_w, 3·temporal·patch·patch] in the reference's order:
//      rows walk 2×2 merge windows (window row, window column, then the four patches inside it row
//      by row), so each window's patches are contiguous for the merger; a row is channel, frame,
//      then the patch's pixels row by row.
//
// The tower consumes `values`; the prompt needs `vision_tokens` image tokens.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "vision/image_decode.h"

namespace rocket {

// What a release's preprocessor_config.json fixes. Defaults: Qwen3.5 / Qwen3.6 / Qwen3-VL releases
// (size.shortest_edge, the minimum pixel count, is 65,536 = 256²; size.longest_edge, the maximum,
// 16,777,216 = 4096²). The plan carries the pixel bounds.
struct VisionProcessorConfig {
  int patch_size = 16;
  int temporal_patch_size = 2;
  int merge_size = 2;
  uint64_t min_pixels = 65536;
  uint64_t max_pixels = 16777216;
  std::array<float, 3> image_mean{0.5f, 0.5f, 0.5f};
  std::array<float, 3> image_std{0.5f, 0.5f, 0.5f};
  double rescale_factor = 1.0 / 255.0;
};

struct ResizedSize {
  int64_t height = 0;
  int64_t width = 0;
};

// The reference's smart_resize(height, width, factor, min_pixels, max_pixels), Python's float
// arithmetic and round-half-to-even included. ImageError (malformed) over a 200:1 aspect ratio.
// REQUIRES: height, width, factor > 0.
ResizedSize smart_resize(int64_t height, int64_t width, int64_t factor, uint64_t min_pixels, uint64_t max_pixels);

// The processor's output for one image: `pixel_values` and its row of `image_grid_thw`.
struct PixelPatches {
  int64_t grid_t = 0, grid_h = 0, grid_w = 0;
  int64_t patch_dim = 0;        // 3 · temporal_patch_size · patch_size²
  std::vector<float> values;    // [grid_t · grid_h · grid_w, patch_dim], row-major
  int64_t vision_tokens = 0;    // grid_t · grid_h · grid_w / merge_size²: the prompt's image tokens
  ResizedSize resized;          // the size the image was resampled to
};

PixelPatches preprocess_image(const RgbImage& image, const VisionProcessorConfig& config = {});

}  // namespace rocket
