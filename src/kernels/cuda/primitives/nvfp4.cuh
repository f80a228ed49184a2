// NVFP4 weight-only dequantisation in registers, for bf16 tensor-core math on Hopper, from the H200
// register code conditioning writes (compiler/nvfp4_code.h). sm_90 has no e2m1 conversion instruction
// (cvt ... .e2m1x2 is sm_100+), so weights become bf16 by moving bits, and the block scale is applied
// with one bf16x2 multiply per two weights:
//
//   bf16 image: a weight's three e2m1 magnitude bits (e e m) at bf16 bits 8..6 (the two lowest exponent
//   bits and the top mantissa bit), its sign at bit 15. The image equals e2m1 * 2^-126 exactly, zero and
//   the subnormal 0.5 included (a bf16 exponent field of 0 is subnormal just as e2m1's is).
//   scale word: the block scale s * 2^119 in bf16, exact (|s| <= 448 keeps it below bf16's 2^128).
//   product: e2m1 * s * 2^-7, exact in bf16 (at most 6 significant bits, smallest 2^-17 is normal).
//
// Results computed from the products are multiplied by scale2 * kNvfp4Unbias (2^7) in fp32.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "compiler/nvfp4_code.h"

namespace rocket::cuda {

inline constexpr float kNvfp4Unbias = 0x1p7f;
static_assert(nvfp4_code::kScaleWordFactor * 0x1p-126f == 1.0f / kNvfp4Unbias, "nvfp4: image and scale biases");

// The bf16x2 scale word (s * 2^119 in both halves) of scale code byte `index` (0..3) of `codes`.
__device__ __forceinline__ uint32_t nvfp4_scale_word(uint32_t codes, int index) {
  const uint32_t spread = __byte_perm(codes, 0u, 0x4040u | uint32_t(index) << 8 | uint32_t(index));  // (b, 0, b, 0)
  return spread * 16u + nvfp4_code::kScaleWordBias;
}

// bf16x2 product of an e2m1 image word and a scale word: the weights times 2^-7, exactly.
__device__ __forceinline__ uint32_t nvfp4_scaled(uint32_t image, uint32_t scale_word) {
  const __nv_bfloat162 p = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&image),
                                   *reinterpret_cast<const __nv_bfloat162*>(&scale_word));
  return *reinterpret_cast<const uint32_t*>(&p);
}

}  // namespace rocket::cuda
