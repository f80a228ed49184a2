#include "vision/image_processor.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "vision/image_error.h"
#include "vision/image_resize.h"

namespace rocket {

ResizedSize smart_resize(int64_t height, int64_t width, int64_t factor, uint64_t min_pixels, uint64_t max_pixels) {
  CHECK(height > 0 && width > 0 && factor > 0, "smart_resize: sizes must be positive");
  // Python: max(h, w) / min(h, w) > 200, a true (float) division.
  const double ratio = static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  if (ratio > 200)
    throw ImageError(ImageError::Kind::malformed,
                     fmt::format("the image is {}x{}: its aspect ratio must be smaller than 200, got {}", width, height, ratio));
  const double h = static_cast<double>(height), w = static_cast<double>(width), f = static_cast<double>(factor);
  // Python's round() on a float rounds half to even, as nearbyint does in the default rounding mode.
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  // Python divides the exact integer product; the double holds it exactly below 2^53, which every
  // image within a decoding bound is.
  const double area = static_cast<double>(height * width);
  if (static_cast<uint64_t>(h_bar * w_bar) > max_pixels) {
    const double beta = std::sqrt(area / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (static_cast<uint64_t>(h_bar * w_bar) < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / area);
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

PixelPatches preprocess_image(const RgbImage& image, const VisionProcessorConfig& config) {
  const int64_t p = config.patch_size, tp = config.temporal_patch_size, m = config.merge_size;
  CHECK(p > 0 && tp > 0 && m > 0, "preprocess_image: patch, temporal patch and merge sizes must be positive");
  CHECK(image.width > 0 && image.height > 0 && image.rgb.size() == size_t(image.width) * image.height * 3,
        "preprocess_image: an empty or inconsistent image");
  PixelPatches out;
  out.resized = smart_resize(image.height, image.width, p * m, config.min_pixels, config.max_pixels);
  const int64_t H = out.resized.height, W = out.resized.width;
  // A size at or above 2^31 pixels a side cannot come from bounds a plan can hold.
  CHECK(H < (int64_t{1} << 31) && W < (int64_t{1} << 31), "preprocess_image: resized size out of range");
  const RgbImage resized = resize_bicubic(image, static_cast<int>(W), static_cast<int>(H));

  // The torchvision backend fuses rescale and normalise: mean and std (float32 tensors) times
  // 1/rescale_factor, then (x - mean') / std' in float32 on the uint8 samples.
  std::array<float, 3> mean{}, std_dev{};
  for (int c = 0; c < 3; ++c) {
    mean[c] = config.image_mean[c] * static_cast<float>(1.0 / config.rescale_factor);
    std_dev[c] = config.image_std[c] * static_cast<float>(1.0 / config.rescale_factor);
  }

  out.grid_t = (1 + tp - 1) / tp;  // one frame, repeated up to a whole temporal patch
  out.grid_h = H / p;
  out.grid_w = W / p;
  out.patch_dim = 3 * tp * p * p;
  const int64_t rows = out.grid_t * out.grid_h * out.grid_w;
  out.vision_tokens = rows / (m * m);
  out.values.resize(static_cast<size_t>(rows * out.patch_dim));

  // The reference reshapes [grid_t, tp, C, gh/m, m, p, gw/m, m, p] and permutes it to
  // [grid_t, gh/m, gw/m, m, m, C, tp, p, p]: row = ((bh·(gw/m) + bw)·m + mh)·m + mw,
  // column = ((c·tp + t)·p + ph)·p + pw, pixel y = (bh·m + mh)·p + ph, x = (bw·m + mw)·p + pw.
  float* row = out.values.data();
  for (int64_t bh = 0; bh < out.grid_h / m; ++bh)
    for (int64_t bw = 0; bw < out.grid_w / m; ++bw)
      for (int64_t mh = 0; mh < m; ++mh)
        for (int64_t mw = 0; mw < m; ++mw, row += out.patch_dim) {
          const int64_t y0 = (bh * m + mh) * p, x0 = (bw * m + mw) * p;
          for (int c = 0; c < 3; ++c)
            for (int64_t t = 0; t < tp; ++t)  // every frame is the one image
              for (int64_t ph = 0; ph < p; ++ph) {
                const uint8_t* src = &resized.rgb[(size_t(y0 + ph) * W + x0) * 3 + c];
                float* dst = row + ((c * tp + t) * p + ph) * p;
                for (int64_t pw = 0; pw < p; ++pw) dst[pw] = (static_cast<float>(src[pw * 3]) - mean[c]) / std_dev[c];
              }
        }
  return out;
}

}  // namespace rocket
