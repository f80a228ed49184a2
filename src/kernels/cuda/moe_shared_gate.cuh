// The shared expert's gate of one token row, sigmoid(shared_expert_gate · x), by one warp. Decode's
// experts (moe_experts.cuh) and the prefill token path (moe_piece.cuh) both call these two functions,
// so a token's shared-expert scale is bit for bit the same on either path: the same loads, the same
// products summed in the same order, the same shuffle tree, the same sigmoid.
#pragma once

#include <cuda_bf16.h>

#include "kernels/cuda/primitives/reduce.cuh"

namespace rocket::cuda {

// shared_expert_gate · x, in every lane: lanes take 8 columns at a time (one 16-byte load of the gate
// and of x each), a lane's partial sum in column order, then the warp's fixed shuffle tree.
// REQUIRES: all 32 lanes of the warp call it; gate and x 16-byte aligned, kHidden columns each.
template <int kHidden>
__device__ __forceinline__ float shared_gate_dot(const __nv_bfloat16* gate, const __nv_bfloat16* x, int lane) {
  static_assert(kHidden % 8 == 0, "shared expert gate: hidden must be a multiple of 8");
  float s = 0.0f;
  for (int k = lane * 8; k < kHidden; k += 256) {
    const uint4 wv = __ldg(reinterpret_cast<const uint4*>(gate + k));
    const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x + k));
    const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&wv);
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 wf = __bfloat1622float2(w2[i]), xf = __bfloat1622float2(x2[i]);
      s += wf.x * xf.x + wf.y * xf.y;
    }
  }
  return warp_sum(s);
}

// The scale the shared expert's output is multiplied by. NOTE: callers compute it in the one lane that
// stores it (after shared_gate_dot), not in every lane: that is the code both kernels compiled to
// before they shared it, instruction for instruction.
__device__ __forceinline__ float shared_gate_scale(float dot) { return 1.0f / (1.0f + expf(-dot)); }

}  // namespace rocket::cuda
