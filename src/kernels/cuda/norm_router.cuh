// The MoE block's entry on the H200: the post-attention RMSNorm of x + delta (the residual stream plus
// the attention or GDN output, summed in fp32 and rounded to bf16 as HF does) together with the
// router's projection of the normalised row, logits[row][e] = Σ_k hn[k]·W[e][k] in fp32 over the bf16
// hn the norm stores (as the dense kernel would read it).
//
// Why one kernel: the router projection is small (kExperts × kDim, 1 MiB for a3b) and its own launch
// costs a chain hand-off and an L2 round trip for hn that are worth more than its math. Each row is
// normalised by kSlices blocks, each projecting it onto kPerSlice experts whose weights it holds in
// registers before the chain's wait; block 0 of a row also writes hn.
//
// The residual stream is not written: the blocks of a row all read x, so none may update it in place.
// The next norm adds both sub-layer outputs instead (rms_norm.cuh, RmsNormParams::delta2), rounding
// after each add, which gives the same bits.
//
// Deterministic: each logit is a fixed-order sum (a thread's 8 columns in order, the warp's tree, then
// the warps in order).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/rms_norm.cuh"

namespace rocket::cuda {

struct NormRouterParams {
  RmsNormParams norm;                     // x, delta, w, y, eps (residual and delta2 unused)
  const __nv_bfloat16* router = nullptr;  // [kExperts][kDim]
  float* logits = nullptr;                // [rows][kExperts]
};

template <int kDim, int kExperts>
struct NormRouterTraits {
  using N = RmsNormTraits<kDim>;
  static constexpr int kThreads = N::kThreads;
  static constexpr int kWarps = kThreads / 32;
  // NOTE: 16 experts per block (64 registers of weights per thread) makes a3b's 256 experts 16 blocks
  // per row: at bucket 16, 256 blocks, one wave.
  static constexpr int kPerSlice = kExperts < 16 ? kExperts : 16;
  static constexpr int kSlices = kExperts / kPerSlice;
  static_assert(N::kPerThread == 1, "norm_router: a row is one 16-byte vector per thread");
  static_assert(kExperts % kPerSlice == 0, "norm_router: experts split evenly over the slices");
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

template <int kDim, int kExperts>
__global__ void __launch_bounds__(NormRouterTraits<kDim, kExperts>::kThreads)
    norm_router_kernel(const __grid_constant__ NormRouterParams p) {
  using T = NormRouterTraits<kDim, kExperts>;
  const int row = blockIdx.x / T::kSlices, slice = blockIdx.x % T::kSlices, tid = threadIdx.x;
  const bool has = tid < T::N::kVectors;  // a thread past the row's vectors holds nothing
  // Weights (dependent_launch.cuh, rule 1): the gain and this slice's router rows, before the wait.
  uint4 gain_raw = make_uint4(0, 0, 0, 0), w_raw[T::kPerSlice];
#pragma unroll
  for (int e = 0; e < T::kPerSlice; ++e) w_raw[e] = make_uint4(0, 0, 0, 0);
  if (has) {
    gain_raw = __ldg(reinterpret_cast<const uint4*>(p.norm.w) + tid);
#pragma unroll
    for (int e = 0; e < T::kPerSlice; ++e)
      w_raw[e] = __ldg(reinterpret_cast<const uint4*>(p.router + int64_t(slice * T::kPerSlice + e) * kDim) + tid);
  }
  release_then_wait();
  __shared__ float scratch[T::kWarps];
  __shared__ float part[T::kWarps][T::kPerSlice];
  const int64_t base = int64_t(row) * kDim;
  float x[8] = {};
  float ss = 0.0f;
  if (has) {
    float d[8];
    unpack8(reinterpret_cast<const uint4*>(p.norm.x + base)[tid], x);
    unpack8(reinterpret_cast<const uint4*>(p.norm.delta + base)[tid], d);
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] += d[i];
    unpack8(pack8(x), x);  // normalise what the residual stream will hold
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += x[i] * x[i];
  }
  const float inv = 1.0f / sqrtf(block_sum<T::kThreads>(ss, scratch) / float(kDim) + p.norm.eps);
  float acc[T::kPerSlice] = {};
  if (has) {
    float g[8], y[8];
    unpack8(gain_raw, g);
#pragma unroll
    for (int i = 0; i < 8; ++i) y[i] = x[i] * inv * (1.0f + g[i]);
    const uint4 hn = pack8(y);
    if (slice == 0) reinterpret_cast<uint4*>(p.norm.y + base)[tid] = hn;
    unpack8(hn, y);  // the router reads hn as stored, in bf16
#pragma unroll
    for (int e = 0; e < T::kPerSlice; ++e) {
      float w[8];
      unpack8(w_raw[e], w);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[e] += y[i] * w[i];
    }
  }
  const int warp = tid / 32, lane = tid % 32;
#pragma unroll
  for (int e = 0; e < T::kPerSlice; ++e) {
    const float s = warp_sum(acc[e]);
    if (lane == 0) part[warp][e] = s;
  }
  __syncthreads();
  if (tid < T::kPerSlice) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < T::kWarps; ++w) s += part[w][tid];
    p.logits[int64_t(row) * kExperts + slice * T::kPerSlice + tid] = s;
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// y = norm(bf16(x + delta)); logits = y · routerᵀ (fp32); x is left as it was. `rows`: the bucket
// (decode) or the chunk's tokens (prefill). REQUIRES: device pointers, 16-byte aligned; y and logits
// alias no input.
template <int kDim, int kExperts>
void norm_router(const NormRouterParams& p, int rows, cudaStream_t stream) {
  using T = NormRouterTraits<kDim, kExperts>;
  CHECK(rows > 0 && p.norm.delta && p.router && p.logits, "norm_router: missing operand");
  launch_dependent(norm_router_kernel<kDim, kExperts>, rows * T::kSlices, T::kThreads, 0, stream, p);
}

}  // namespace rocket::cuda
