// The stage arithmetic of one warp's weight tile (kernels/cuda/primitives/weight_tile.cuh): a lane
// loads 16 bytes of weight rows g and g + 8 per stage, 32 NVFP4, 16 FP8 or 8 bf16 weights, so a warp
// stage spans four lanes' loads of columns.
#pragma once

#include "fuel/chemistry.h"

namespace rocket::tiling {

// Weights per lane per 16-byte load.
constexpr int load_k(Precision p) { return p == Precision::kNVFP4 ? 32 : p == Precision::kFP8Block ? 16 : 8; }
constexpr int stage_k(Precision p) { return 4 * load_k(p); }  // columns per warp stage
constexpr int stages(Precision p, int k) { return (k + stage_k(p) - 1) / stage_k(p); }
// Bytes of one weight row of k columns (NVFP4: the packed codes; its scales apart).
constexpr int row_bytes(Precision p, int k) { return p == Precision::kNVFP4 ? k / 2 : p == Precision::kFP8Block ? k : 2 * k; }

// FP8 block scales (`weight_scale_inv`): one fp32 per 128 x 128 block, [ceil(rows/128)][ceil(k/128)].
inline constexpr int kFp8Block = 128;
constexpr int fp8_scale_cols(int k) { return (k + kFp8Block - 1) / kFp8Block; }

}  // namespace rocket::tiling
