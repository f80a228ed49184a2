// Programmatic dependent launch (sm_90) for a step's chain of kernels: every kernel of a step is
// launched with launch_dependent(), so the device starts it while the kernel before it is still
// running, instead of after it has completed and the launch has gone through the front end (a few
// microseconds per kernel; a decode step at bucket 1 is ~500 kernels).
//
// The contract every kernel of the chain keeps, in this order:
//   1. before wait_prerequisites(): only reads of weights (never written during a step) — prefetching
//      or loading into registers the first weights it will use — and of state that this kernel alone
//      reads and writes within a step (a linear layer's conv history and recurrent state, a full
//      layer's KV cache below each row's position: the last kernel to touch it was this one, in an
//      earlier step, and a step starts only after everything before it on the stream completed), with
//      the step inputs that locate it (positions, slots, page tables). Nothing written by an earlier
//      kernel of the step is read, and nothing is written (an earlier kernel may still read it).
//   2. wait_prerequisites(): returns once the kernel before this one has completed and its writes are
//      visible. Every block calls it, including blocks that then have nothing to do, so that this
//      kernel completing implies the one before it completed, and so on down the chain.
//   3. release_dependents(): the next kernel may launch once every block of this one has called it.
//      A long kernel calls it right after the wait. A short one (a norm, the routing, the conv step,
//      the attention combine) calls it before the wait (release_then_wait), so the long kernel after
//      it launches and loads its first weights during the tail of the long kernel before it, not
//      after. Either way no kernel can wait on one that is not resident: a kernel launches only once
//      every block of the one before it has released, i.e. has started.
// A kernel launched without the attribute (a plain <<<>>>, or the first kernel after a copy) keeps
// the contract trivially: griddepcontrol is then a no-op.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/primitives/cuda_check.h"

namespace rocket::cuda {

__device__ __forceinline__ void wait_prerequisites() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void release_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
// Steps 2 and 3 together, for kernels with no weights to fetch early.
__device__ __forceinline__ void enter_chain() {
  wait_prerequisites();
  release_dependents();
}
// Steps 3 and 2, for a short kernel between two long ones (rule 3).
__device__ __forceinline__ void release_then_wait() {
  release_dependents();
  wait_prerequisites();
}

// Launches `kernel` on `stream` as a programmatic dependent of the kernel before it.
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
  CUDA_CHECK_LAUNCH();
}

}  // namespace rocket::cuda
