#include "vision/image_resize.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rocket {
namespace {

// Keys' cubic convolution kernel at a = -0.5 (PyTorch's aa_filter for bicubic with antialias, the
// same constant as PIL's bicubic), evaluated in PyTorch's operation order.
double cubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// One axis's taps: output i reads inputs [first[i], first[i] + count[i]) with weights
// weights[i * taps + j], integers scaled by 2^precision.
struct AxisTaps {
  int taps = 0;
  unsigned precision = 0;
  std::vector<int64_t> first, count;
  std::vector<int16_t> weights;
};

AxisTaps axis_taps(int64_t in, int64_t out) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;  // interp_size 4, halved, stretched
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  AxisTaps t;
  t.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out);
  t.count.resize(out);
  std::vector<double> w(static_cast<size_t>(out) * t.taps, 0.0);
  double w_max = 0.0;
  for (int64_t i = 0; i < out; ++i) {
    const double center = scale * (i + 0.5);
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    const int64_t xsize = std::clamp(std::min(static_cast<int64_t>(center + support + 0.5), in) - xmin, int64_t{0},
                                     static_cast<int64_t>(t.taps));
    double* wi = &w[static_cast<size_t>(i) * t.taps];
    double total = 0.0;
    for (int64_t j = 0; j < xsize; ++j) {
      wi[j] = cubic_filter((j + xmin - center + 0.5) * invscale);
      total += wi[j];
    }
    if (total != 0.0) {
      for (int64_t j = 0; j < xsize; ++j) {
        wi[j] /= total;
        w_max = std::max(w_max, wi[j]);
      }
    }
    t.first[i] = xmin;
    t.count[i] = xsize;
  }
  // The most bits (up to 22) at which the largest weight still rounds below 2^15.
  for (t.precision = 0; t.precision < 22; ++t.precision) {
    if (static_cast<int>(0.5 + w_max * (1 << (t.precision + 1))) >= (1 << 15)) break;
  }
  t.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * (1 << t.precision);
    t.weights[k] = static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return t;
}

uint8_t settle(int32_t sum, unsigned precision) {
  return static_cast<uint8_t>(std::clamp(sum >> precision, 0, 255));
}

RgbImage resize_width(const RgbImage& in, int width) {
  const AxisTaps t = axis_taps(in.width, width);
  RgbImage out{width, in.height, std::vector<uint8_t>(size_t(width) * in.height * 3)};
  for (int y = 0; y < in.height; ++y) {
    const uint8_t* row = &in.rgb[size_t(y) * in.width * 3];
    uint8_t* dst = &out.rgb[size_t(y) * width * 3];
    for (int x = 0; x < width; ++x) {
      const int16_t* w = &t.weights[size_t(x) * t.taps];
      const uint8_t* src = row + t.first[x] * 3;
      int32_t r = 1 << (t.precision - 1), g = r, b = r;
      for (int64_t j = 0; j < t.count[x]; ++j) {
        r += src[3 * j] * w[j];
        g += src[3 * j + 1] * w[j];
        b += src[3 * j + 2] * w[j];
      }
      dst[3 * x] = settle(r, t.precision);
      dst[3 * x + 1] = settle(g, t.precision);
      dst[3 * x + 2] = settle(b, t.precision);
    }
  }
  return out;
}

RgbImage resize_height(const RgbImage& in, int height) {
  const AxisTaps t = axis_taps(in.height, height);
  const size_t stride = size_t(in.width) * 3;
  RgbImage out{in.width, height, std::vector<uint8_t>(stride * height)};
  std::vector<int32_t> acc(stride);
  for (int y = 0; y < height; ++y) {
    std::fill(acc.begin(), acc.end(), 1 << (t.precision - 1));
    const int16_t* w = &t.weights[size_t(y) * t.taps];
    for (int64_t j = 0; j < t.count[y]; ++j) {
      const uint8_t* src = &in.rgb[(t.first[y] + j) * stride];
      for (size_t k = 0; k < stride; ++k) acc[k] += src[k] * w[j];
    }
    uint8_t* dst = &out.rgb[size_t(y) * stride];
    for (size_t k = 0; k < stride; ++k) dst[k] = settle(acc[k], t.precision);
  }
  return out;
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& image, int width, int height) {
  CHECK(width > 0 && height > 0 && image.width > 0 && image.height > 0, "resize_bicubic: empty size");
  CHECK(image.rgb.size() == size_t(image.width) * image.height * 3, "resize_bicubic: pixels do not match the size");
  // PyTorch's order: the contiguous (horizontal) axis first, each pass only where the size changes.
  if (width == image.width && height == image.height) return image;
  if (width == image.width) return resize_height(image, height);
  RgbImage wide = resize_width(image, width);
  return height == image.height ? wide : resize_height(wide, height);
}

}  // namespace rocket
