// Per-head preparation of gated-attention inputs on the H200: the zero-centred RMSNorm HF applies
// to each query and key head (q_norm / k_norm), then partial rotate-half RoPE at the row's
// multimodal rotary position (docs/vision-tower.md, "The text side"). Used inside the
// attention kernels (attention_decode.cuh, attention_prefill.cuh), never as a kernel of its own: the
// normalised query lives only in shared memory and registers, the key only in the KV cache.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/primitives/reduce.cuh"

namespace rocket::cuda {

// A row's rotary position on the three axes of the text model's multimodal rotary (time, height,
// width). A text token's three are equal: its KV index, plus its sequence's rope delta after a
// prompt with images (vision/mrope_positions.h); an image token's are its merged patch's frame, row
// and column offset by where its image starts. Staged per row by the engine beside the KV index,
// which stays the token's index in the sequence.
struct RopePosition {
  int32_t t = 0, h = 0, w = 0;
  static constexpr RopePosition text(int32_t p) { return {p, p, p}; }
};

// RoPE frequencies inv_freq_i = 1 / theta^(2i / rotary_dim), computed on the host in fp32 exactly as
// torch (and host::apply_rope) computes them. NOTE: a device powf differs from glibc's in the last
// bit for some i, which at position 8192 moves an angle by ~1e-4 rad; carrying the host's table by
// value in the kernel params keeps every angle float(pos) * inv_freq_i on the reference's value.
// `axis[i]`: the position frequency i rotates by (0 time, 1 height, 2 width), the interleaved layout
// of host::apply_mrope for the text config's mrope_section; at a text position every axis is equal,
// so the section changes no bit of a text row.
template <int kRotaryDim>
struct RopeTable {
  static_assert(kRotaryDim > 0 && kRotaryDim % 2 == 0, "rotary dim must be even");
  float inv_freq[kRotaryDim / 2];
  uint8_t axis[kRotaryDim / 2];

  static RopeTable make(double theta, const int (&section)[3] = kDefaultSection) {
    RopeTable t;
    // NOTE: volatile keeps the compiler from folding powf for a constant theta (MPFR, correctly
    // rounded), which can differ in the last bit from the run-time powf host::apply_rope calls.
    volatile float base = float(theta);
    for (int i = 0; i < kRotaryDim / 2; ++i) {
      t.inv_freq[i] = 1.0f / std::pow(float(base), float(2 * i) / float(kRotaryDim));
      t.axis[i] = uint8_t((i % 3 == 1 && i < 3 * section[1]) ? 1 : (i % 3 == 2 && i < 3 * section[2]) ? 2 : 0);
    }
    return t;
  }
  static constexpr int kDefaultSection[3] = {11, 11, 10};  // the releases' (host::kMropeSection)
};

// One head's operands as lane l of a warp holds them: dims l, l + 32, ... of x and of the gain w,
// loaded by load_head (a head is read once per kernel, so the 2-byte strided loads cost nothing that
// matters). Loading is split from the math so a warp can have several heads' loads in flight.
template <int kHeadDim>
struct HeadOperands {
  static_assert(kHeadDim % 32 == 0, "a warp normalises a head in whole passes of 32 dims");
  static constexpr int kPer = kHeadDim / 32;
  float x[kPer], w[kPer];
};

template <int kHeadDim>
__device__ __forceinline__ HeadOperands<kHeadDim> load_head(const __nv_bfloat16* x, const __nv_bfloat16* w) {
  const int lane = threadIdx.x % 32;
  HeadOperands<kHeadDim> h;
#pragma unroll
  for (int i = 0; i < h.kPer; ++i) {
    h.x[i] = __bfloat162float(x[i * 32 + lane]);
    h.w[i] = __bfloat162float(w[i * 32 + lane]);
  }
  return h;
}

// One warp: y = rope(x · rsqrt(mean(x²) + eps) · (1 + w), pos) · out_scale for one head, y fp32 in
// shared memory. Rotates the first kRotaryDim dims: pair (i, i + kRotaryDim/2) by angle
// float(p_i) · inv_freq_i, p_i the position on axis[i]. REQUIRES: all 32 lanes of the warp call it.
template <int kHeadDim, int kRotaryDim>
__device__ __forceinline__ void norm_rope_head(const HeadOperands<kHeadDim>& in, const RopeTable<kRotaryDim>& rope,
                                               RopePosition pos, float eps, float out_scale, float* y) {
  static_assert(kRotaryDim <= kHeadDim, "rotary dims exceed the head");
  constexpr int kPer = HeadOperands<kHeadDim>::kPer, kHalf = kRotaryDim / 2;
  const int lane = threadIdx.x % 32;
  float v[kPer];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) ss += in.x[i] * in.x[i];
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / float(kHeadDim) + eps);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    v[i] = in.x[i] * inv * (1.0f + in.w[i]);
    y[i * 32 + lane] = v[i];
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int d = i * 32 + lane;
    if (d < kRotaryDim) {
      const bool low = d < kHalf;
      const int f = low ? d : d - kHalf;
      const int axis = rope.axis[f];
      float s, c;
      sincosf(float(axis == 0 ? pos.t : axis == 1 ? pos.h : pos.w) * rope.inv_freq[f], &s, &c);
      const float partner = y[low ? d + kHalf : d - kHalf];
      v[i] = low ? v[i] * c - partner * s : v[i] * c + partner * s;
    }
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < kPer; ++i) y[i * 32 + lane] = v[i] * out_scale;
  __syncwarp();
}

}  // namespace rocket::cuda
