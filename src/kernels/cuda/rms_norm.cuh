// Zero-centred RMSNorm of the residual stream on the H200: y = x · rsqrt(mean(x²) + eps) · (1 + w),
// FP32 math, bf16 in memory (the plan's activation dtype). One block per row.
//
// The fused form first folds a sub-layer's output into the residual stream: x = bf16(x + delta) is
// stored, then normalised. That is where every norm but the first sits in the forward pass (after
// attention/GDN: post_attention_layernorm; after the MoE block: the next layer's input_layernorm or
// the final norm), so the residual add costs no pass of its own. The sum is rounded to bf16 before
// the norm reads it, as HF's bf16 model does.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"
#include "kernels/cuda/primitives/reduce.cuh"

namespace rocket::cuda {

struct RmsNormParams {
  const __nv_bfloat16* x = nullptr;      // [rows][kDim]
  const __nv_bfloat16* delta = nullptr;  // fused form only: [rows][kDim], added into x first
  __nv_bfloat16* residual = nullptr;     // fused form only: receives x + delta (may alias x)
  const __nv_bfloat16* w = nullptr;      // [kDim], zero-centred gain
  __nv_bfloat16* y = nullptr;            // [rows][kDim]; may not alias x or residual
  float eps = 1e-6f;
};

template <int kDim>
struct RmsNormTraits {
  static constexpr int kVectors = kDim / 8;  // uint4 = 8 bf16
  static constexpr int kThreads = kVectors < 32 ? 32 : (kVectors > 256 ? 256 : kVectors);
  static constexpr int kPerThread = (kVectors + kThreads - 1) / kThreads;  // vectors held in registers
  static_assert(kDim % 8 == 0, "rows are read as 16-byte vectors");
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

__device__ __forceinline__ void unpack8(const uint4& v, float f[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ uint4 pack8(const float f[8]) {
  uint4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

template <int kDim, bool kFused>
__global__ void __launch_bounds__(RmsNormTraits<kDim>::kThreads) rms_norm_kernel(const __grid_constant__ RmsNormParams p) {
  using T = RmsNormTraits<kDim>;
  // The gain is a weight (dependent_launch.cuh, rule 1): in registers before the chain's wait, so the
  // block's tail after its sum has no load left to wait for.
  uint4 w_raw[T::kPerThread];
#pragma unroll
  for (int k = 0; k < T::kPerThread; ++k) {
    const int v = threadIdx.x + k * T::kThreads;
    if (v < T::kVectors) w_raw[k] = __ldg(reinterpret_cast<const uint4*>(p.w) + v);
  }
  release_then_wait();
  __shared__ float scratch[T::kThreads / 32];
  const int64_t base = int64_t(blockIdx.x) * kDim;
  float x[T::kPerThread][8];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < T::kPerThread; ++k) {
    const int v = threadIdx.x + k * T::kThreads;
    if (v >= T::kVectors) break;
    unpack8(reinterpret_cast<const uint4*>(p.x + base)[v], x[k]);
    if constexpr (kFused) {
      float d[8];
      unpack8(reinterpret_cast<const uint4*>(p.delta + base)[v], d);
#pragma unroll
      for (int i = 0; i < 8; ++i) x[k][i] += d[i];
      const uint4 sum = pack8(x[k]);
      reinterpret_cast<uint4*>(p.residual + base)[v] = sum;
      unpack8(sum, x[k]);  // normalise what the residual stream holds
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += x[k][i] * x[k][i];
  }
  const float inv = 1.0f / sqrtf(block_sum<T::kThreads>(ss, scratch) / float(kDim) + p.eps);
#pragma unroll
  for (int k = 0; k < T::kPerThread; ++k) {
    const int v = threadIdx.x + k * T::kThreads;
    if (v >= T::kVectors) break;
    float w[8], y[8];
    unpack8(w_raw[k], w);
#pragma unroll
    for (int i = 0; i < 8; ++i) y[i] = x[k][i] * inv * (1.0f + w[i]);
    reinterpret_cast<uint4*>(p.y + base)[v] = pack8(y);
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// y = norm(x). `rows`: the bucket (decode) or the chunk's tokens (prefill).
template <int kDim>
void rms_norm(const RmsNormParams& p, int rows, cudaStream_t stream) {
  CHECK(rows > 0, "rms_norm of no rows");
  launch_dependent(rms_norm_kernel<kDim, false>, rows, RmsNormTraits<kDim>::kThreads, 0, stream, p);
}

// residual = bf16(x + delta); y = norm(residual).
template <int kDim>
void add_rms_norm(const RmsNormParams& p, int rows, cudaStream_t stream) {
  CHECK(rows > 0 && p.delta && p.residual, "add_rms_norm needs delta and residual");
  launch_dependent(rms_norm_kernel<kDim, true>, rows, RmsNormTraits<kDim>::kThreads, 0, stream, p);
}

}  // namespace rocket::cuda
