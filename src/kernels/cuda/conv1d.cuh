// GDN short convolution on the H200: depthwise causal conv1d (kernel kKernel) + SiLU over the q|k|v
// channels, stepping each stream's conv state (host reference: kernels/host/conv1d.h).
//
// Work is split into groups: a group is one stream slot and `tokens` consecutive rows of x that belong
// to it, run in order with the state held in registers. Decode: one group per bucket row, 1 token each
// (rows past the live streams run on the padding slot). Prefill: one group, the chunk's tokens.
//
// State layout (the plan's conv_state buffer, shared with the host booster): fp32
// [slot][linear layer][kChannels][kKernel - 1], oldest input first. The caller passes this layer's
// state of slot 0 and the distance between slots.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"

namespace rocket::cuda {

struct Conv1dParams {
  const __nv_bfloat16* x = nullptr;  // [groups * tokens][kChannels]: in_proj_qkv output
  const __nv_bfloat16* w = nullptr;  // [kChannels][kKernel]: conv1d.weight squeezed
  float* state = nullptr;            // this layer's conv state of slot 0
  int64_t slot_stride = 0;           // floats between consecutive slots' states
  const int32_t* slots = nullptr;    // [groups], device memory
  __nv_bfloat16* out = nullptr;      // [groups * tokens][kChannels]; may not alias x
  int tokens = 1;
};

template <int kChannels, int kKernel>
struct Conv1dTraits {
  static constexpr int kThreads = 256;
  static constexpr int kHistory = kKernel - 1;
  static constexpr int kBlocksPerGroup = (kChannels + kThreads - 1) / kThreads;
  static_assert(kKernel == 4, "weights are read as one 8-byte vector per channel");
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

template <int kChannels, int kKernel>
__global__ void __launch_bounds__(Conv1dTraits<kChannels, kKernel>::kThreads)
    conv1d_kernel(const __grid_constant__ Conv1dParams p) {
  using T = Conv1dTraits<kChannels, kKernel>;
  const int group = blockIdx.x / T::kBlocksPerGroup;
  const int c = (blockIdx.x % T::kBlocksPerGroup) * T::kThreads + threadIdx.x;
  if (c >= kChannels) {
    release_then_wait();  // dependent_launch.cuh: every block waits
    return;
  }
  // Weights and this layer's history before the chain's wait: the history is read and written by
  // this kernel alone (dependent_launch.cuh, rule 1).
  float* s = p.state + int64_t(__ldg(p.slots + group)) * p.slot_stride + int64_t(c) * T::kHistory;
  float hist[T::kHistory];
#pragma unroll
  for (int j = 0; j < T::kHistory; ++j) hist[j] = s[j];
  float w[kKernel];
  {
    const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p.w + int64_t(c) * kKernel));
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
    const float2 w01 = __bfloat1622float2(h[0]), w23 = __bfloat1622float2(h[1]);
    w[0] = w01.x, w[1] = w01.y, w[2] = w23.x, w[3] = w23.y;
  }
  release_then_wait();
  const int64_t row0 = int64_t(group) * p.tokens;
  for (int t = 0; t < p.tokens; ++t) {
    const int64_t at = (row0 + t) * kChannels + c;
    const float xc = __bfloat162float(p.x[at]);
    // Same accumulation order as the host kernel: history oldest first, then the new input.
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < T::kHistory; ++j) acc += hist[j] * w[j];
    acc += xc * w[T::kHistory];
#pragma unroll
    for (int j = 0; j + 1 < T::kHistory; ++j) hist[j] = hist[j + 1];
    hist[T::kHistory - 1] = xc;
    p.out[at] = __float2bfloat16_rn(acc / (1.0f + expf(-acc)));
  }
#pragma unroll
  for (int j = 0; j < T::kHistory; ++j) s[j] = hist[j];
}


// A prefill piece's conv with every (row, channel) a thread of its own: the sequential kernel's loop
// over a piece's rows waits for each row's load in turn (~0.7 ms a layer at 2048 rows), this one is
// bandwidth-bound. Same products in the same order as conv1d_kernel, so the outputs are bit-identical.
// Leaves the state alone: conv1d_capture writes the state after the piece once this has run.
template <int kChannels, int kKernel>
__global__ void __launch_bounds__(256) conv1d_piece_kernel(const __grid_constant__ Conv1dParams p) {
  constexpr int kHistory = kKernel - 1;
  const int64_t i = int64_t(blockIdx.x) * 256 + threadIdx.x;
  if (i >= int64_t(p.tokens) * kChannels) return;
  const int t = int(i / kChannels), c = int(i % kChannels);
  const float* s = p.state + int64_t(__ldg(p.slots)) * p.slot_stride + int64_t(c) * kHistory;
  const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p.w + int64_t(c) * kKernel));
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  const float2 w01 = __bfloat1622float2(h[0]), w23 = __bfloat1622float2(h[1]);
  const float w[kKernel] = {w01.x, w01.y, w23.x, w23.y};
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < kHistory; ++j) {
    const int row = t - kHistory + j;
    acc += (row >= 0 ? __bfloat162float(p.x[int64_t(row) * kChannels + c]) : s[kHistory + row]) * w[j];
  }
  acc += __bfloat162float(p.x[i]) * w[kHistory];
  p.out[i] = __float2bfloat16_rn(acc / (1.0f + expf(-acc)));
}

// The conv state a stream would hold after the first `boundary` rows of a prefill group, written to
// `dst` (a snapshot's [kChannels][kKernel - 1] of this layer) without stepping the stream: history j
// is the input of row boundary - (kKernel - 1) + j, or of the state before the group where that row
// is negative. Runs before the group's conv1d_prefill, which replaces the state.
template <int kChannels, int kKernel>
__global__ void __launch_bounds__(256) conv1d_capture_kernel(const __grid_constant__ Conv1dParams p, int boundary,
                                                              float* dst) {
  constexpr int kHistory = kKernel - 1;
  const int c = blockIdx.x * 256 + threadIdx.x;
  if (c >= kChannels) return;
  const float* s = p.state + int64_t(__ldg(p.slots)) * p.slot_stride + int64_t(c) * kHistory;
#pragma unroll
  for (int j = 0; j < kHistory; ++j) {
    const int row = boundary - kHistory + j;
    dst[int64_t(c) * kHistory + j] = row >= 0 ? __bfloat162float(p.x[int64_t(row) * kChannels + c]) : s[kHistory + row];
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// Decode: B groups of one token each, row i on slot slots[i].
template <int B, int kChannels, int kKernel>
void conv1d_decode(const Conv1dParams& p, cudaStream_t stream) {
  using T = Conv1dTraits<kChannels, kKernel>;
  CHECK(p.tokens == 1, "conv1d decode steps one token per row");
  launch_dependent(conv1d_kernel<kChannels, kKernel>, B * T::kBlocksPerGroup, T::kThreads, 0, stream, p);
}

// Prefill: one stream, p.tokens (1..kChunk) tokens in order, on slot slots[0].
template <int kChunk, int kChannels, int kKernel>
void conv1d_prefill(const Conv1dParams& p, cudaStream_t stream) {
  using T = Conv1dTraits<kChannels, kKernel>;
  CHECK(p.tokens >= 1 && p.tokens <= kChunk, "conv1d prefill takes 1..chunk tokens");
  launch_dependent(conv1d_kernel<kChannels, kKernel>, T::kBlocksPerGroup, T::kThreads, 0, stream, p);
}

// Prefill piece: one stream (slots[0]), p.tokens rows at once. The state is not stepped: follow with
// conv1d_capture(p, p.tokens, the slot's own state) (it reads only rows or entries it has not written).
template <int kChannels, int kKernel>
void conv1d_piece(const Conv1dParams& p, cudaStream_t stream) {
  static_assert(kKernel == 4, "conv1d piece: weights read as one 8-byte vector per channel");
  CHECK(p.tokens >= 1 && p.out != p.x, "conv1d piece: rows");
  const int64_t threads = int64_t(p.tokens) * kChannels;
  conv1d_piece_kernel<kChannels, kKernel><<<unsigned((threads + 255) / 256), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

// The state after row `boundary` (1..p.tokens) of one stream's group, into dst; see conv1d_capture_kernel.
template <int kChannels, int kKernel>
void conv1d_capture(const Conv1dParams& p, int boundary, float* dst, cudaStream_t stream) {
  CHECK(boundary >= 1 && boundary <= p.tokens && dst, "conv1d capture: boundary outside the group");
  conv1d_capture_kernel<kChannels, kKernel><<<(kChannels + 255) / 256, 256, 0, stream>>>(p, boundary, dst);
  CUDA_CHECK_LAUNCH();
}

}  // namespace rocket::cuda
