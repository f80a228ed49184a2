#include "boosters/memory_budget.h"

#include "boosters/profile.h"
#include "core/error.h"

namespace rocket {

namespace {

double gib(uint64_t bytes) { return double(bytes) / double(kGiB); }

}  // namespace

uint64_t MemoryBudget::usable() const {
  const uint64_t held = reserve + floor;
  if (held < reserve || held >= free) return 0;  // first test: overflow of the sum
  return free - held;
}

void MemoryBudget::admit(uint64_t residency, std::string_view memory) const {
  const uint64_t room = usable();
  if (residency <= room) return;
  fail("upright: plan residency {:.2f} GiB exceeds usable {} {:.2f} GiB (free {:.2f} GiB - reserve {:.2f} GiB - "
       "floor {:.2f} GiB) by {:.2f} GiB; rebuild with a smaller --max-context, or free memory",
       gib(residency), memory, gib(room), gib(free), gib(reserve), gib(floor), gib(residency - room));
}

std::string MemoryBudget::describe() const {
  return fmt::format("free {:.2f} GiB - reserve {:.1f} MiB - floor {:.2f} GiB = usable {:.2f} GiB", gib(free),
                     double(reserve) / double(kMiB), gib(floor), gib(usable()));
}

}  // namespace rocket
