// Decode-shape linear layer on the H200: y[b][r] = sum_c W[r][c] * x[b][c] for the B token rows of
// one bucket (B a compile-time constant). Weight-streaming bound: every weight byte is read once per
// step and reused for all B rows from registers; x is staged in shared memory per K tile.
//
// Weights: BF16 row-major, or NVFP4 weight-only (packed e2m1, element 2i in the low nibble; e4m3
// scale per 16 along K; fp32 global scale), dequantised in registers. Activations bf16, output fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "fuel/chemistry.h"
#include "kernels/cuda/cuda_check.h"

namespace rocket::cuda {

struct GemvParams {
  const void* w = nullptr;           // kBF16: bf16 [rows][cols]; kNVFP4: uint8 [rows][cols/2]
  const uint8_t* scale16 = nullptr;  // kNVFP4: e4m3 [rows][cols/16]
  float scale2 = 1.0f;               // kNVFP4: global scale
  const __nv_bfloat16* x = nullptr;  // [B][cols]
  float* y = nullptr;                // [B][rows]
  int rows = 0, cols = 0;
};

// Tile shapes; shared memory = B * kTile * 4 bytes, checked against the H200's 227 KiB opt-in limit.
template <int B>
struct GemvTraits {
  static constexpr int kWarps = 8;
  static constexpr int kRowsPerWarp = B <= 8 ? 4 : 2;  // independent row loads in flight per warp
  static constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
  static constexpr int kTile = B <= 8 ? 2048 : 1024;  // columns of x staged per pass
  static constexpr int kSmemBytes = B * kTile * 4;
  static_assert(kSmemBytes <= 227 * 1024, "gemv: x tile exceeds the H200 per-block shared memory limit");
  static_assert(kTile % 256 == 0, "a warp consumes 256 columns (32 lanes x 8) per step");
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

__device__ __forceinline__ float e2m1_value(uint32_t nibble) {
  // ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = mag[nibble & 7u];
  return (nibble & 8u) ? -v : v;
}

// Eight consecutive weights of row `row` starting at column c (c % 8 == 0), as fp32.
template <Precision P>
__device__ __forceinline__ void load8(const GemvParams& p, int row, int c, float w[8]) {
  if constexpr (P == Precision::kBF16) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.w) + size_t(row) * p.cols + c));
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      w[2 * i] = f.x;
      w[2 * i + 1] = f.y;
    }
  } else {
    static_assert(P == Precision::kNVFP4, "gemv: bf16 and nvfp4 weights only");
    const uint32_t q = __ldg(reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(p.w) + (size_t(row) * p.cols + c) / 2));
    const __nv_fp8_e4m3 s = *reinterpret_cast<const __nv_fp8_e4m3*>(p.scale16 + size_t(row) * (p.cols / 16) + c / 16);
    const float scale = float(s) * p.scale2;
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = e2m1_value(q >> (4 * i)) * scale;
  }
}

template <int B, Precision P>
__global__ void __launch_bounds__(GemvTraits<B>::kWarps * 32) gemv_kernel(const __grid_constant__ GemvParams p) {
  using T = GemvTraits<B>;
  extern __shared__ float xs[];  // [B][kTile]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * T::kWarps + warp) * T::kRowsPerWarp;
  float acc[T::kRowsPerWarp][B];
#pragma unroll
  for (int r = 0; r < T::kRowsPerWarp; ++r)
#pragma unroll
    for (int b = 0; b < B; ++b) acc[r][b] = 0.0f;

  for (int k0 = 0; k0 < p.cols; k0 += T::kTile) {
    const int kt = min(T::kTile, p.cols - k0);
    __syncthreads();
    for (int i = threadIdx.x; i < B * kt; i += blockDim.x) {
      const int b = i / kt, c = i - b * kt;
      xs[b * T::kTile + c] = __bfloat162float(p.x[size_t(b) * p.cols + k0 + c]);
    }
    __syncthreads();
    // Columns outer, rows inner: each step issues one load per row before any math, so a warp has
    // kRowsPerWarp independent loads in flight (rows past the end re-read the last row, unused).
#pragma unroll 2
    for (int c = lane * 8; c < kt; c += 256) {
      float w[T::kRowsPerWarp][8];
#pragma unroll
      for (int r = 0; r < T::kRowsPerWarp; ++r) load8<P>(p, min(row0 + r, p.rows - 1), k0 + c, w[r]);
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const float4 x0 = *reinterpret_cast<const float4*>(xs + b * T::kTile + c);
        const float4 x1 = *reinterpret_cast<const float4*>(xs + b * T::kTile + c + 4);
#pragma unroll
        for (int r = 0; r < T::kRowsPerWarp; ++r)
          acc[r][b] += w[r][0] * x0.x + w[r][1] * x0.y + w[r][2] * x0.z + w[r][3] * x0.w + w[r][4] * x1.x +
                       w[r][5] * x1.y + w[r][6] * x1.z + w[r][7] * x1.w;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < T::kRowsPerWarp; ++r) {
    const int row = row0 + r;
#pragma unroll
    for (int b = 0; b < B; ++b) {
      float v = acc[r][b];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0 && row < p.rows) p.y[size_t(b) * p.rows + row] = v;
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// REQUIRES: cols % 8 == 0 (kNVFP4: % 16), 16-byte aligned rows, x and y device pointers.
template <int B, Precision P>
void gemv(const GemvParams& p, cudaStream_t stream) {
  using T = GemvTraits<B>;
  CHECK(p.cols % (P == Precision::kNVFP4 ? 16 : 8) == 0 && p.rows > 0, "gemv: unsupported shape");
  static bool configured = false;  // NOTE: one attribute call per instantiation, before any capture
  if (!configured) {
    CUDA_CHECK(cudaFuncSetAttribute(gemv_kernel<B, P>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
    configured = true;
  }
  const int blocks = (p.rows + T::kRowsPerBlock - 1) / T::kRowsPerBlock;
  gemv_kernel<B, P><<<blocks, T::kWarps * 32, T::kSmemBytes, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace rocket::cuda
