// Moving bf16 tiles between shared memory and mma.m16n8k16 fragments (weight_tile.cuh's
// mma_bf16_16816): the ldmatrix forms the attention kernels read Q, K and V with, and the packing of
// two fp32 values into the bf16x2 register of a fragment. `addr` is a shared-memory address
// (shared_address); each of the lanes that supply rows (0-7 per matrix) points at 16 contiguous bytes.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace rocket::cuda {

// Four 8x8 matrices: lane (g, c) receives row g, columns 2c and 2c + 1 of each.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same, transposed: lane (g, c) receives rows 2c and 2c + 1 of column g (a B operand from a
// row-major [k][n] tile).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Two matrices, transposed (lanes 0-15 supply the rows): one k16n8 B operand.
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t& b0, uint32_t& b1, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(b0), "=r"(b1) : "r"(addr));
}

// Two floats as bf16x2, lo in the low half (the lower column of an mma fragment pair).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

}  // namespace rocket::cuda
