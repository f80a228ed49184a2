// The memory budget (docs/doctrine.md, "Memory budget"): usable = memory free when the engine starts − the reserve
// it holds outside its arena − the floor. A plan whose residency (its arena_bytes) exceeds usable is
// refused; nothing is ever sized from a fraction of total memory. The compiler applies the rule to a
// hardware profile (profile.h), each engine's upright to what it measures when it starts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rocket {

struct MemoryBudget {
  uint64_t free = 0;     // memory free when the engine starts (device: right after context creation)
  uint64_t reserve = 0;  // what the engine holds outside its arena, plus what the operator keeps back
  uint64_t floor = 0;    // headroom never handed to the arena (kHostFloor / kH200Floor)

  // free − reserve − floor, or 0 when reserve + floor already exceed free.
  uint64_t usable() const;
  // Refuses to start: Error("upright: plan residency … exceeds usable <memory> …") with residency,
  // usable memory, its terms and the difference in GiB. `memory` names it: "device memory".
  void admit(uint64_t residency, std::string_view memory) const;
  // "free F GiB - reserve R MiB - floor L GiB = usable U GiB", as upright logs it.
  std::string describe() const;
};

}  // namespace rocket
