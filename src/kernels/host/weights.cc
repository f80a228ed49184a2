#include "kernels/host/weights.h"

#include <array>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/host/cpu_clones.h"

namespace rocket::host {
namespace {

// Decoding through tables keeps the per-element cost to one load; the conversions in core/dtype are
// exact but branchy.
const std::array<float, 256> kE4m3 = [] {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = e4m3_to_f32(uint8_t(i));
  return t;
}();

// One packed NVFP4 byte -> its two values, low nibble first (the element order of the layout).
struct Pair { float lo, hi; };
const std::array<Pair, 256> kE2m1Pairs = [] {
  std::array<Pair, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = {e2m1_to_f32(uint8_t(i & 0xf)), e2m1_to_f32(uint8_t(i >> 4))};
  return t;
}();

}  // namespace

void check_view(const WeightView& w) {
  CHECK(w.rows > 0 && w.cols > 0 && w.data != nullptr, "empty weight view");
  switch (w.precision) {
    case Precision::kBF16: break;
    case Precision::kFP8Block: CHECK(w.scale_inv != nullptr, "FP8 view without scale_inv"); break;
    case Precision::kNVFP4:
      CHECK(w.scale16 != nullptr, "NVFP4 view without scale16");
      CHECK(w.cols % kNvfp4Group == 0, "NVFP4 cols must be a multiple of 16");
      break;
  }
}

// NOTE: `omp simd` because -O2's cheap vectoriser cost model skips loops of unknown trip count.
// The x86-64-v3 clone lets the bf16 widening and scale multiplies run 8 wide; the resolver
// picks it once at load time by CPU feature, so machines without AVX2 still run the default clone.
ROCKET_CPU_CLONES
void dequantize_row(const WeightView& w, int64_t r, float* out) {
  const int64_t cols = w.cols;
  switch (w.precision) {
    case Precision::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(w.data) + r * cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) out[c] = bf16_to_f32(src[c]);
      return;
    }
    case Precision::kFP8Block: {
      const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * cols;
      const int64_t blocks = (cols + kFp8Block - 1) / kFp8Block;
      const float* scales = w.scale_inv + (r / kFp8Block) * blocks;
      for (int64_t b = 0; b < blocks; ++b) {
        const float s = scales[b];
        const int64_t end = std::min(cols, (b + 1) * kFp8Block);
#pragma omp simd
        for (int64_t c = b * kFp8Block; c < end; ++c) out[c] = kE4m3[src[c]] * s;
      }
      return;
    }
    case Precision::kNVFP4: {
      const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * (cols / 2);
      const uint8_t* scales = w.scale16 + r * (cols / kNvfp4Group);
      for (int64_t g = 0; g < cols / kNvfp4Group; ++g) {
        // e4m3 * scale2 folded into one factor: one rounding more than (e2m1*e4m3)*scale2 (whose
        // first product is exact), well inside fp32 accumulation error of any dot product.
        const float s = kE4m3[scales[g]] * w.scale2;
        const uint8_t* bytes = src + g * (kNvfp4Group / 2);
        float* o = out + g * kNvfp4Group;
#pragma omp simd
        for (int i = 0; i < kNvfp4Group / 2; ++i) {
          const Pair p = kE2m1Pairs[bytes[i]];
          o[2 * i] = p.lo * s;
          o[2 * i + 1] = p.hi * s;
        }
      }
      return;
    }
  }
}

}  // namespace rocket::host
