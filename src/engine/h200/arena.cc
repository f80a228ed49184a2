#include "engine/h200/arena.h"

#include <cuda_runtime.h>

#include <cstdio>

#include "boosters/profile.h"
#include "kernels/cuda/primitives/cuda_check.h"

namespace rocket {

Arena::Arena(uint64_t arena_bytes) : bytes_(arena_bytes) {
  CHECK(arena_bytes > 0, "an arena holds at least the weight blob");
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, arena_bytes);
  // The budget admitted this size, so a failure here means something else took device memory between
  // the measurement and now (another process on a shared GPU): say so rather than report a bare CUDA error.
  if (err != cudaSuccess)
    fail("upright: cannot allocate the {:.2f} GiB arena on the device: {} (was device memory taken after the "
         "budget was measured?)",
         double(arena_bytes) / double(kGiB), cudaGetErrorString(err));
  base_ = static_cast<std::byte*>(p);
  const cudaError_t poisoned = cudaMemset(base_, 0xff, arena_bytes);
  if (poisoned != cudaSuccess) cudaFree(base_);  // no destructor runs for a constructor that throws
  cuda_check(poisoned, "cudaMemset(arena, 0xff)", __FILE__, __LINE__);
}

Arena::~Arena() {
  // Teardown may run while an Error unwinds, where throwing is not an option: report instead.
  const cudaError_t err = cudaFree(base_);
  if (err != cudaSuccess) std::fprintf(stderr, "[engine] freeing the arena failed: %s\n", cudaGetErrorString(err));
}

}  // namespace rocket
