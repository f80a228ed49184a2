// Asynchronous copies global -> shared (cp.async, sm_80+): each thread issues 4, 8 or 16 bytes that
// land without passing through its registers; commit groups a thread's copies so far, and
// wait_group<N> blocks until at most N of its groups are in flight. The token-path pipelines (MoE
// piece GEMM, chunked GDN, flash attention) stage their tiles this way; a block barrier after the wait
// makes every thread's copies visible to all.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/primitives/bulk_copy.cuh"

namespace rocket::cuda {

// 16 bytes to shared address dst, bypassing L1; valid false writes zeros and reads nothing (src must
// still be a mapped address).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid = true) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid = true) {
  cp_async16(shared_address(dst), src, valid);
}

// 4 or 8 bytes (cp.async.ca: through L1, the only form for copies under 16 bytes).
template <int kBytes>
__device__ __forceinline__ void cp_async_small(void* dst, const void* src) {
  static_assert(kBytes == 4 || kBytes == 8, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(shared_address(dst)), "l"(src), "n"(kBytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

}  // namespace rocket::cuda
