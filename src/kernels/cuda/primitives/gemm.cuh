// Row-major projections of many token rows on cuBLAS (the CUDA toolkit's), for the prefill token path:
// at hundreds of rows a projection is a tensor-core GEMM, compute-bound, where cuBLAS's Hopper kernels
// (wgmma, TMA) are the well-kept implementation; decode's weight-streaming kernels (dense.cuh) stay ours.
//
//   y[rows][n] = alpha * x[rows][k] · w[n][k]ᵀ (+ beta * y)      bf16 x and w, fp32 accumulation
//
// cuBLAS is column-major: a row-major [rows][n] matrix is its column-major [n][rows], so y = w · x in
// its terms with w transposed (column-major w is [k][n]). Deterministic for a given shape: cuBLAS picks
// the same algorithm every call, and the handle's workspace (set once from the plan's arena, so it never
// allocates) serves any split-K reduction in a fixed order.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/cuda/primitives/cublas_check.h"

namespace rocket::cuda {

// y (bf16 or fp32, leading dimension ldy) = alpha · x · wᵀ + beta · y. x has leading dimension ldx.
template <typename Out>
void gemm_rows(cublasHandle_t h, const __nv_bfloat16* w, int n, int k, const __nv_bfloat16* x, int ldx, int rows, Out* y,
               int ldy, float alpha = 1.0f, float beta = 0.0f) {
  static_assert(std::is_same_v<Out, __nv_bfloat16> || std::is_same_v<Out, float>, "gemm_rows: bf16 or fp32 output");
  constexpr cudaDataType out_type = std::is_same_v<Out, float> ? CUDA_R_32F : CUDA_R_16BF;
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &alpha, w, CUDA_R_16BF, k, x, CUDA_R_16BF, ldx, &beta, y,
                            out_type, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace rocket::cuda
