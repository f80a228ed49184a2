// A non-owning view of one linear weight W [rows][cols] (row-major, y = W x) in the precision the fuel
// stores it in. Kernels dequantise on the fly; the view never copies.
//
// Layouts by precision (all row-major):
//   kBF16     data = uint16_t bf16 [rows][cols]; scale_inv, scale16 unused.
//   kFP8Block data = uint8_t e4m3 [rows][cols]; scale_inv = float [ceil(rows/128)][ceil(cols/128)];
//             W[r][c] = e4m3(data[r][c]) * scale_inv[r/128][c/128].
//   kNVFP4    data = uint8_t [rows][cols/2] packed e2m1, element 2i in the LOW nibble of byte i and
//             2i+1 in the HIGH nibble; scale16 = e4m3 [rows][cols/16]; scale2 = global fp32;
//             W[r][c] = e2m1(nibble) * e4m3(scale16[r][c/16]) * scale2.  REQUIRES: cols % 16 == 0.
#pragma once

#include <cstdint>

#include "fuel/chemistry.h"

namespace rocket::host {

// FP8 block-scale granularity (DeepSeek/Qwen FP8 checkpoints) and NVFP4 scale group along K.
constexpr int64_t kFp8Block = 128;
constexpr int64_t kNvfp4Group = 16;

struct WeightView {
  Precision precision = Precision::kBF16;
  int64_t rows = 0, cols = 0;
  const void* data = nullptr;
  const float* scale_inv = nullptr;  // kFP8Block only
  const uint8_t* scale16 = nullptr;  // kNVFP4 only
  float scale2 = 1.0f;               // kNVFP4 only
};

// Writes row r of W, dequantised to fp32, into out[cols]. REQUIRES: 0 <= r < rows.
void dequantize_row(const WeightView& w, int64_t r, float* out);

// Checks the view is internally consistent (pointers present, NVFP4 cols divisible by 16). Aborts on
// violation: a bad view is a programming error, the loader has already validated the fuel.
void check_view(const WeightView& w);

}  // namespace rocket::host
