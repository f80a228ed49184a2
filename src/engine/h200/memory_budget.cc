#include "engine/h200/memory_budget.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "boosters/profile.h"
#include "core/align.h"
#include "core/error.h"
#include "kernels/cuda/primitives/cuda_check.h"

namespace rocket {

namespace {

double gib(uint64_t bytes) { return double(bytes) / double(kGiB); }

}  // namespace

uint64_t MemoryBudget::usable() const {
  const uint64_t held = reserve + floor;
  if (held < reserve || held >= free) return 0;  // first test: overflow of the sum
  return free - held;
}

void MemoryBudget::admit(uint64_t residency) const {
  const uint64_t room = usable();
  if (residency <= room) return;
  fail("upright: plan residency {:.2f} GiB exceeds usable device memory {:.2f} GiB (free {:.2f} GiB - reserve "
       "{:.2f} GiB - floor {:.2f} GiB) by {:.2f} GiB; rebuild with a smaller --max-context, or free the device",
       gib(residency), gib(room), gib(free), gib(reserve), gib(floor), gib(residency - room));
}

std::string MemoryBudget::describe() const {
  return fmt::format("free {:.2f} GiB - reserve {:.1f} MiB - floor {:.2f} GiB = usable {:.2f} GiB", gib(free),
                     double(reserve) / double(kMiB), gib(floor), gib(usable()));
}

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
