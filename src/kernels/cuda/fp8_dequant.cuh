// A block-FP8 weight (e4m3 [n][k], one fp32 scale per 128 x 128 block) dequantised to bf16, for the
// prefill token path: its projections are cuBLAS BF16 GEMMs over hundreds of rows (gemm.cuh), which
// read the dequantised copy; decode's kernels dequantise in registers instead (weight_tile.cuh). Each
// weight becomes bf16(e4m3 * scale), the value the decode kernels multiply (fp8.cuh), so both paths
// compute with the same weights.
//
// One thread per 16 weights: a 16-byte load, two 16-byte stores. Graph-capturable; no allocation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/fp8.cuh"
#include "kernels/tiling/weight_tile.h"

namespace rocket::cuda {

__global__ void __launch_bounds__(256) fp8_dequant_kernel(const uint8_t* __restrict__ w, const float* __restrict__ scale, int n,
                                                          int k, __nv_bfloat16* __restrict__ out) {
  const int per_row = k / 16;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(n) * per_row) return;
  const int row = int(i / per_row), col = int(i % per_row) * 16;
  const int scale_cols = (k + tiling::kFp8Block - 1) / tiling::kFp8Block;
  const float s = __ldg(scale + int64_t(row / tiling::kFp8Block) * scale_cols + col / tiling::kFp8Block);
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(w + int64_t(row) * k + col));
  uint4 lo, hi;
  fp8_scaled_quad(v.x, s, lo.x, lo.y);
  fp8_scaled_quad(v.y, s, lo.z, lo.w);
  fp8_scaled_quad(v.z, s, hi.x, hi.y);
  fp8_scaled_quad(v.w, s, hi.z, hi.w);
  uint4* dst = reinterpret_cast<uint4*>(out + int64_t(row) * k + col);
  dst[0] = lo;
  dst[1] = hi;
}

// REQUIRES: device pointers; k a multiple of 16; w and out 16-byte aligned; out holds n * k bf16.
inline void fp8_dequant(const uint8_t* w, const float* scale, int n, int k, __nv_bfloat16* out, cudaStream_t stream) {
  CHECK(k % 16 == 0 && n >= 1, "fp8 dequant: k must be a multiple of 16");
  const int64_t threads = int64_t(n) * (k / 16);
  fp8_dequant_kernel<<<unsigned((threads + 255) / 256), 256, 0, stream>>>(w, scale, n, k, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace rocket::cuda
