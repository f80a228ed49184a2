// The H200 engine's memory budget (DESIGN.md, doctrine): usable = device memory free right after
// context creation − the reserve the engine holds outside its arena, measured at startup − the floor.
// Upright refuses to start when the plan's residency (its arena_bytes) exceeds usable; it never sizes
// anything from a fraction of total memory. The same rule the compiler applied to the hardware profile
// (src/boosters/profile.h), measured again on the machine that launches.
#pragma once

#include <cstdint>
#include <string>

namespace rocket {

struct MemoryBudget {
  uint64_t free = 0;     // device memory free right after context creation
  uint64_t reserve = 0;  // what the engine holds outside its arena (streams, events, workspace)
  uint64_t floor = 0;    // headroom never handed to the arena (kH200Floor: driver growth after startup)

  // free − reserve − floor, or 0 when reserve + floor already exceed free.
  uint64_t usable() const;
  // Refuses to start: an Error giving the plan's residency, usable memory and the difference in GiB.
  void admit(uint64_t residency) const;
  // "free F GiB − reserve R MiB − floor L GiB = usable U GiB", as upright logs it.
  std::string describe() const;
};

// Free memory on the current device now (cudaMemGetInfo).
uint64_t device_free_bytes();

// The budget once the engine holds everything it keeps outside its arena: the reserve is how far free
// memory dropped since `free_at_context` (read with device_free_bytes() right after context creation,
// before anything was allocated), at least the workspace (kH200Workspace), rounded up to 64 KiB, the
// rule probe_h200 applies.
MemoryBudget measure_budget(uint64_t free_at_context);

}  // namespace rocket
