// The stage arithmetic of one warp's weight tile (kernels/cuda/primitives/weight_tile.cuh): a lane
// loads 16 bytes of weight rows g and g + 8 per stage, 32 NVFP4 or 8 bf16 weights, so a warp stage
// spans four lanes' loads of columns.
#pragma once

namespace rocket::tiling {

constexpr int load_k(bool nvfp4) { return nvfp4 ? 32 : 8; }  // weights per lane per 16-byte load
constexpr int stage_k(bool nvfp4) { return 4 * load_k(nvfp4); }  // columns per warp stage
constexpr int stages(bool nvfp4, int k) { return (k + stage_k(nvfp4) - 1) / stage_k(nvfp4); }

}  // namespace rocket::tiling
