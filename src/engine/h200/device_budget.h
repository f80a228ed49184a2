// The H200 engine's memory budget (boosters/memory_budget.h) measured on the device: free memory
// right after context creation, and the reserve the engine holds outside its arena.
#pragma once

#include <cstdint>

#include "boosters/memory_budget.h"

namespace rocket {

// Free memory on the current device now (cudaMemGetInfo).
uint64_t device_free_bytes();

// The budget once the engine holds everything it keeps outside its arena: the reserve is how far free
// memory dropped since `free_at_context` (read with device_free_bytes() right after context creation,
// before anything was allocated), at least the workspace (kH200Workspace), rounded up to 64 KiB, the
// rule probe_h200 applies.
MemoryBudget measure_budget(uint64_t free_at_context);

}  // namespace rocket
