// Profiling driver (not a check: no reference, constant data): the a3b LM head dense kernel at one
// live row (bucket 1), one live row (bucket 8) and eight live rows (bucket 8), twice, one launch each,
// for ncu. Bucket 1 runs at ~86% of copy and bucket 8 at ~99% (dense_check); this shows where.
//
// Here (one line):
//   nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY -cudart static
//     tools/device/lm_head_profile.cu -o .carry/checks/lm_profile
// There (one line):
//   ncu --clock-control none -k regex:dense_kernel --launch-count 6 --section SpeedOfLight
//     --section MemoryWorkloadAnalysis --section WarpStateStats .carry/checks/lm_profile
#include <cuda_bf16.h>
#include <cstdio>
#include "kernels/cuda/dense.cuh"
using namespace rocket;
int main() {
  constexpr int N = 248320, K = 2048;
  __nv_bfloat16 *w, *x; float* y;
  CUDA_CHECK(cudaMalloc(&w, size_t(N) * K * 2));
  CUDA_CHECK(cudaMalloc(&x, size_t(8) * K * 2));
  CUDA_CHECK(cudaMalloc(&y, size_t(8) * N * 4));
  CUDA_CHECK(cudaMemset(w, 0x3c, size_t(N) * K * 2));
  CUDA_CHECK(cudaMemset(x, 0x3d, size_t(8) * K * 2));
  for (int rep = 0; rep < 2; ++rep) {
    cuda::dense<N, K, 1, float>({.w = w, .x = x, .y = y, .rows = 1}, nullptr);
    cuda::dense<N, K, 8, float>({.w = w, .x = x, .y = y, .rows = 1}, nullptr);
    cuda::dense<N, K, 8, float>({.w = w, .x = x, .y = y, .rows = 8}, nullptr);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("lm_profile done\n");
  return 0;
}
