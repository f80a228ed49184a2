#include "engine/h200/device_budget.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "boosters/profile.h"
#include "core/align.h"
#include "kernels/cuda/primitives/cuda_check.h"

namespace rocket {

uint64_t device_free_bytes() {
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

MemoryBudget measure_budget(uint64_t free_at_context) {
  // Work queued before this point may still be finishing its allocations.
  CUDA_CHECK(cudaDeviceSynchronize());
  const uint64_t now = device_free_bytes();
  const uint64_t drop = free_at_context > now ? free_at_context - now : 0;
  // NOTE: on a shared GPU another process freeing memory meanwhile can shrink the measured drop; the
  // engine holds at least its workspace whatever the measurement says.
  return MemoryBudget{.free = free_at_context, .reserve = align_up(std::max(drop, kH200Workspace)), .floor = kH200Floor};
}

}  // namespace rocket
