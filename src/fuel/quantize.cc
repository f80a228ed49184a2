#include "fuel/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"

namespace rocket {

Parts quantize(const TensorSpec& w, int64_t rows, int64_t cols, const RowSource& row, float bound) {
  Parts parts;
  switch (w.precision) {
    case Precision::kBF16: {
      auto& out = parts[w.part];
      out.resize(uint64_t(rows) * cols * 2);
      auto* p = reinterpret_cast<uint16_t*>(out.data());
#pragma omp parallel for schedule(dynamic, 16)
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> v(static_cast<size_t>(cols));
        row(r, v.data());
        for (int64_t j = 0; j < cols; ++j) p[r * cols + j] = f32_to_bf16(v[size_t(j)]);
      }
      break;
    }
    case Precision::kFP8Block: {
      const int64_t rb = (rows + 127) / 128, cb = (cols + 127) / 128;
      auto& q = parts[Part::kWeight];
      auto& s = parts[Part::kScaleInv128];
      q.resize(uint64_t(rows) * cols);
      s.resize(uint64_t(rb) * cb * 4);
      auto* scale = reinterpret_cast<float*>(s.data());
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t b = 0; b < rb; ++b) {
        const int64_t r0 = b * 128, r1 = std::min(rows, r0 + 128);
        std::vector<float> v(uint64_t(r1 - r0) * cols);
        for (int64_t r = r0; r < r1; ++r) row(r, &v[uint64_t(r - r0) * cols]);
        for (int64_t k = 0; k < cb; ++k) {
          const int64_t c0 = k * 128, c1 = std::min(cols, c0 + 128);
          float amax = 0;
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t j = c0; j < c1; ++j) amax = std::max(amax, std::fabs(v[(r - r0) * cols + j]));
          const float si = amax > 0 ? amax / kE4M3Max : 1.0f;
          scale[b * cb + k] = si;
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t j = c0; j < c1; ++j) q[uint64_t(r) * cols + j] = f32_to_e4m3(v[(r - r0) * cols + j] / si);
        }
      }
      break;
    }
    case Precision::kNVFP4: {
      // Global scale from the bound on |value|, so every block scale fits e4m3.
      const float scale2 = bound > 0 ? bound / (kE4M3Max * kE2M1Max) : 1.0f;
      auto& q = parts[Part::kWeight];
      auto& s16 = parts[Part::kScale16];
      q.resize(uint64_t(rows) * cols / 2);
      s16.resize(uint64_t(rows) * cols / 16);
#pragma omp parallel for schedule(dynamic, 16)
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> values(static_cast<size_t>(cols));
        row(r, values.data());
        for (int64_t g = 0; g < cols / 16; ++g) {
          const float* v = &values[size_t(g * 16)];
          float amax = 0;
          for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(v[i]));
          uint8_t sc = f32_to_e4m3(amax / kE2M1Max / scale2);
          float eff = e4m3_to_f32(sc) * scale2;
          s16[uint64_t(r) * (cols / 16) + g] = sc;
          for (int i = 0; i < 16; i += 2) {
            uint8_t lo = eff > 0 ? f32_to_e2m1(v[i] / eff) : 0, hi = eff > 0 ? f32_to_e2m1(v[i + 1] / eff) : 0;
            q[(uint64_t(r) * cols + g * 16 + i) / 2] = uint8_t(lo | (hi << 4));
          }
        }
      }
      auto f32_bytes = [](float f) {
        std::vector<uint8_t> b(4);
        std::memcpy(b.data(), &f, 4);
        return b;
      };
      parts[Part::kScale2] = f32_bytes(scale2);
      // Activation scale ModelOpt records from calibration (amax / (6 * 448)); weight-only engines
      // do not use it. A typical post-norm activation amax of 8 stands in for calibration.
      parts[Part::kInputScale] = f32_bytes(8.0f / (kE4M3Max * kE2M1Max));
      break;
    }
  }
  return parts;
}

Parts quantize_bf16(const TensorSpec& w, int64_t rows, int64_t cols, const TensorView& source) {
  if (source.dtype != DType::kBF16 || source.nbytes != uint64_t(rows) * uint64_t(cols) * 2)
    fail("{}: {} bytes of {}, not the {} x {} BF16 values to convert from", w.name, source.nbytes,
         dtype_name(source.dtype), rows, cols);
  const auto* values = reinterpret_cast<const uint16_t*>(source.data);
  float amax = 0;
  if (w.precision == Precision::kNVFP4)
    for (uint64_t i = 0; i < source.nbytes / 2; ++i) amax = std::max(amax, std::fabs(bf16_to_f32(values[i])));
  return quantize(w, rows, cols, [&](int64_t r, float* out) {
    for (int64_t j = 0; j < cols; ++j) out[j] = bf16_to_f32(values[r * cols + j]);
  }, amax);
}

}  // namespace rocket
