// Warp- and block-wide reductions shared by the H200 kernels (FP32 sums, max, integer prefix sums).
//
// Sums are reduced as a fixed butterfly, so a kernel's result is bitwise reproducible from run to run
// (graph replays included); the order differs from the host kernels' sequential sums, which is why the
// GPU checks compare with a rounding tolerance rather than bitwise.
#pragma once

#include <cuda_runtime.h>

namespace rocket::cuda {

// Sum over the `kLanes` consecutive lanes that share a group (kLanes a power of two <= 32); every
// lane of the group gets the total.
template <int kLanes = 32>
__device__ __forceinline__ float warp_sum(float v) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "lane group must be a power of two");
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A float's bits as an unsigned key in the float's order (-0 just below +0; finite values and
// infinities, not NaN): integer compares, wider packed keys and redux instructions then order floats
// (warp_max below is one redux instead of a five-step shuffle tree).
__device__ __forceinline__ unsigned ordered_key(float v) {
  const unsigned u = __float_as_uint(v);
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}

__device__ __forceinline__ float from_ordered_key(unsigned k) { return __uint_as_float(k & 0x80000000u ? k & 0x7fffffffu : ~k); }

// Maximum over the warp, every lane gets it. REQUIRES: no NaN.
__device__ __forceinline__ float warp_max(float v) { return from_ordered_key(__reduce_max_sync(0xffffffffu, ordered_key(v))); }

// Sum over a block of kThreads threads; every thread gets the total. `scratch` holds kThreads / 32
// floats and may be reused after the call (the trailing barrier protects it).
template <int kThreads>
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block of whole warps");
  constexpr int kWarps = kThreads / 32;
  v = warp_sum(v);
  if constexpr (kWarps == 1) {
    return v;
  } else {
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += scratch[w];
    __syncthreads();
    return total;
  }
}

// Exclusive prefix sum over a block of kThreads threads in thread order (T an integer type, so the
// result does not depend on the order of additions); `total` gets the block's sum. `scratch` holds one
// value per warp. Ends with a barrier, so scratch may be reused.
template <int kThreads, class T>
__device__ __forceinline__ T block_exclusive_scan(T v, T* scratch, T& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  T incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T up = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += up;
  }
  if (lane == 31) scratch[warp] = incl;
  __syncthreads();
  T before = incl - v;
  total = 0;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w < warp) before += scratch[w];
    total += scratch[w];
  }
  __syncthreads();
  return before;
}

}  // namespace rocket::cuda
