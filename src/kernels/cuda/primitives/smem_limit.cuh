// A kernel's dynamic shared-memory limit, raised once. Above 48 KiB a kernel launches only after
// cudaFuncSetAttribute has raised its limit, and that call is not a stream operation: inside a graph
// capture it would not be captured. So each launcher raises its kernel's limit on its first call, and
// the engines and checks make that first call before any capture (static fire runs every bucket once
// directly; the checks warm up before they time a graph).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/primitives/cuda_check.h"

namespace rocket::cuda {

// Sets Kernel's cudaFuncAttributeMaxDynamicSharedMemorySize to `bytes` on the first call for that
// kernel; later calls do nothing (a failed call is retried by the next). Not thread-safe: one thread
// launches the kernels of a process (the engines' owner thread).
template <auto Kernel>
void raise_smem_limit_once(int bytes) {
  static bool raised = false;
  if (raised) return;
  CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  raised = true;
}

}  // namespace rocket::cuda
