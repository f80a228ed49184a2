// NVFP4 weight-only dequantisation in registers, for bf16 tensor-core math on Hopper.
//
// ModelOpt NVFP4 (weights.h): W[r][c] = e2m1(nibble) * e4m3(scale16[r][c/16]) * scale2, element 2i in
// the low nibble of byte i. sm_90 has no e2m1 conversion instruction (cvt ... .e2m1x2 is sm_100+), so
// a nibble is turned into bf16 by moving bits, and the block scale is applied with one bf16x2 multiply
// per two weights:
//
//   bf16 image: the nibble's three magnitude bits (e e m) go to bf16 bits 8..6 (the two lowest exponent
//   bits and the top mantissa bit), its sign to bit 15. The image equals e2m1 * 2^-126 exactly, zero and
//   the subnormal 0.5 included (a bf16 exponent field of 0 is subnormal just as e2m1's is).
//   scale word: e4m3 * 2^119 in bf16, exact (e4m3 <= 448 keeps it below bf16's 2^128 overflow).
//   product: e2m1 * e4m3 * 2^-7, exact in bf16 (at most 6 significant bits, smallest 2^-17 is normal).
//
// Results computed from the products are multiplied by scale2 * kNvfp4Unbias (2^7) in fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace rocket::cuda {

inline constexpr float kNvfp4ScaleBias = 0x1p119f;
inline constexpr float kNvfp4Unbias = 0x1p7f;

// Eight e2m1 (element i in nibble i of q) as four bf16x2 images: word j = (element j, element j + 4).
// NOTE: pairing j with j + 4 (16 bits apart) lets one multiply place both halves: for a nibble isolated
// at bit 0 (or 4), x * (2^6 + 2^12) (or x * (2^2 + 2^8)) holds its magnitude at bits 8..6 and its sign
// at bit 15, copies that cannot carry into each other; the mask drops the stray copies. Activations
// paired the same way (tensor-core operands only need A and B to agree on the k order) cost one prmt.
__device__ __forceinline__ void e2m1x8_images(uint32_t q, uint32_t w[4]) {
  constexpr uint32_t kKeep = 0x81C081C0u;  // sign bit 15 and bits 8..6 of both halves
  const uint32_t q8 = q >> 8;
  w[0] = ((q & 0x000F000Fu) * 4160u) & kKeep;
  w[1] = ((q & 0x00F000F0u) * 260u) & kKeep;
  w[2] = ((q8 & 0x000F000Fu) * 4160u) & kKeep;
  w[3] = ((q8 & 0x00F000F0u) * 260u) & kKeep;
}

// Two e4m3 block scales (first in the low byte) as bf16x2 words (s * 2^119, s * 2^119), one per scale.
__device__ __forceinline__ void nvfp4_scale_words(uint16_t two_e4m3, uint32_t& first, uint32_t& second) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(two_e4m3, __NV_E4M3);  // exact: e4m3 fits in f16
  const float2 f = __half22float2(__half2(h));
  const __nv_bfloat162 a = __floats2bfloat162_rn(f.x * kNvfp4ScaleBias, f.x * kNvfp4ScaleBias);
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.y * kNvfp4ScaleBias, f.y * kNvfp4ScaleBias);
  first = *reinterpret_cast<const uint32_t*>(&a);
  second = *reinterpret_cast<const uint32_t*>(&b);
}

// bf16x2 product of an e2m1 image word and a scale word: the weights times 2^-7, exactly.
__device__ __forceinline__ uint32_t nvfp4_scaled(uint32_t image, uint32_t scale_word) {
  const __nv_bfloat162 p = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&image),
                                   *reinterpret_cast<const __nv_bfloat162*>(&scale_word));
  return *reinterpret_cast<const uint32_t*>(&p);
}

}  // namespace rocket::cuda
