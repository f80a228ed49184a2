// Quantise: one weight's values written in its precision's stored parts, as checkpoints store them:
//   BF16                the values, rounded to nearest even
//   block-128 FP8       e4m3 `weight` and an fp32 `weight_scale_inv` per 128 x 128 block (amax / 448)
//   ModelOpt NVFP4      packed e2m1 `weight` (two a byte, low nibble first), an e4m3 `weight_scale` per
//                       16 along K, the fp32 global `weight_scale_2` (bound / (448 * 6)) and the
//                       `input_scale` ModelOpt records from calibration
// The forge draws values through it; a build that changes a BF16 fuel's precision map converts
// through it, so both write the same bytes for the same values.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "fuel/manifest.h"
#include "fuel/safetensors.h"

namespace rocket {

// The bytes of every stored part of one weight (its values and, if quantised, its scales).
using Parts = std::map<Part, std::vector<uint8_t>>;

// Row r's `cols` values into `out`; called from several threads at once, for different rows.
using RowSource = std::function<void(int64_t r, float* out)>;

// `w`'s parts for `rows` x `cols` values. `bound` bounds |value| (NVFP4's global scale: the measured
// largest |value| as ModelOpt takes it, or a distribution's bound); unused for the other precisions.
Parts quantize(const TensorSpec& w, int64_t rows, int64_t cols, const RowSource& row, float bound);

// The same from a checkpoint's BF16 tensor `source` of `rows` x `cols` values (Error naming it when it
// is not), NVFP4's global scale from its measured largest |value| as ModelOpt takes it: how a BF16
// fuel is written in another precision (forge --from, build --precision).
Parts quantize_bf16(const TensorSpec& w, int64_t rows, int64_t cols, const TensorView& source);

}  // namespace rocket
