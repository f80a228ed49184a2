// Upright's plan check, the same for every engine: the plan.json an engine directory holds must be
// the plan the engine binary was compiled from (its generated engine.h), or the binary would run
// offsets and shapes that are not there. The memory half of upright is boosters/memory_budget.h.
#pragma once

#include <cstdint>
#include <string>

#include "plan/plan.h"

namespace rocket {

// What an engine binary was compiled for, from its engine.h.
struct EngineBuild {
  std::string fingerprint;  // kFingerprint
  std::string booster;      // kBooster
  uint64_t blob_bytes = 0, arena_bytes = 0;
  // The KV arena holds a full context for every slot, the padding slot included: slots × pages per
  // stream cache pages, each a K and a V page of every full-attention layer.
  int slots = 0, pages_per_stream = 0, full_layers = 0;
};

// Error("upright: …") naming the first of chemistry, booster, memory map or KV pages that differs.
void check_plan(const Plan& plan, const EngineBuild& built);

}  // namespace rocket
