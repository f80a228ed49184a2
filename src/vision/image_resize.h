// Bicubic resampling of 8-bit RGB with antialiasing, as the reference processor resizes: the
// default image processor of Qwen3-VL / Qwen3.5 under transformers 5.x is the torchvision one
// (`Qwen2VLImageProcessor`, `image_processor_type: Qwen2VLImageProcessorFast`), which calls
// `torchvision.transforms.v2.functional.resize(uint8 tensor, BICUBIC, antialias=True)`; on a CPU
// torchvision keeps uint8 for bicubic and PyTorch resamples it in integers
// (`upsample_bicubic2d_aa`'s uint8 path, ported from Pillow-SIMD).
//
// This is that path, written out: per axis, Keys' cubic (a = -0.5) stretched by the downscale
// factor (the antialias), weights normalised in double, then rounded to int16 at the largest
// precision that keeps the largest weight under 2^15; the horizontal pass first into a uint8
// image, then the vertical one; each output is (sum + 2^(p-1)) >> p clamped to [0, 255]. An axis
// whose size does not change is not resampled. docs/images.md says how it differs from PIL's.
#pragma once

#include "vision/image_decode.h"

namespace rocket {

// REQUIRES: width, height > 0; image non-empty.
RgbImage resize_bicubic(const RgbImage& image, int width, int height);

}  // namespace rocket
