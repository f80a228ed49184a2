// Upright's plan check, the same for every engine: the plan.json an engine directory holds must be
// the plan the engine binary was compiled from (its generated engine.h), or the binary would run
// offsets and shapes that are not there. The memory half of upright is boosters/memory_budget.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace rocket {

// What an engine binary was compiled for, from its engine.h.
struct EngineBuild {
  std::string fingerprint;  // kFingerprint
  std::string booster;      // kBooster
  uint64_t blob_bytes = 0, arena_bytes = 0;
  // The KV arena holds a full context for every slot, the padding slot included: slots × pages per
  // stream cache pages, each a K and a V page of every full-attention layer.
  int slots = 0, pages_per_stream = 0, kv_layers = 0;  // kv_layers: Plan::kv_layers()
  // Whether the engine maps the router's expert ids to units through its engine.h kExpertUnit, and
  // that table ([layer][expert] = unit). An engine that does not (its kernels take unit = expert id)
  // runs only plans in the identity order.
  bool maps_expert_units = false;
  std::vector<std::vector<int>> expert_units;
  int split_boosters = 1;  // kSplitBoosters: the boosters one engine spans (1: not split)
};

// Error("upright: …") naming the first of arrangement, chemistry, booster, memory map, KV pages or
// expert order that differs. A split plan runs only on an engine built split over its boosters (the
// host's; the h200 split engine is not built yet): on one booster it would silently be another rocket.
void check_plan(const Plan& plan, const EngineBuild& built);

}  // namespace rocket
