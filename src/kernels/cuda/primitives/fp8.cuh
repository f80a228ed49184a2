// Block-FP8 weight-only dequantisation in registers, for bf16 tensor-core math on Hopper: the e4m3
// weights of a `-FP8` release (`weight` e4m3, `weight_scale_inv` one fp32 per 128 x 128 block).
// sm_90 converts two e4m3 to two f16 in one instruction, exactly (every e4m3 value is an f16); the
// pair is then scaled in fp32 and rounded once to bf16, so a weight the kernels multiply is
// bf16(e4m3 * scale): the BF16 checkpoint's rounding of the same dequantised value.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace rocket::cuda {

// The bf16x2 word of e4m3 bytes (lo, hi) of `pair` (its low 16 bits), times `scale`: lo in the low half.
__device__ __forceinline__ uint32_t fp8_scaled_pair(uint32_t pair, float scale) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(pair & 0xffffu), __NV_E4M3);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const uint32_t*>(&b);
}

// Four e4m3 weights (bytes 0..3 of `quad`, columns in order) as two bf16x2 words scaled by `scale`:
// `lo` holds columns 0, 1 and `hi` columns 2, 3, as bf16 weight words pair them.
__device__ __forceinline__ void fp8_scaled_quad(uint32_t quad, float scale, uint32_t& lo, uint32_t& hi) {
  lo = fp8_scaled_pair(quad, scale);
  hi = fp8_scaled_pair(quad >> 16, scale);
}

}  // namespace rocket::cuda
