// The static memory map: every weight part and every runtime buffer at a literal offset in one arena.
#pragma once

#include "plan/plan.h"

namespace rocket {

struct PlanOptions {
  std::string booster = "host";
  std::vector<int> buckets = {1, 2, 4, 8, 16, 32};
  int max_context = 0;       // 0 = the booster's default for this chemistry
  int prefill_chunk = 0;     // 0 = the booster's default: host 32; h200 2048, the token path's largest piece
  int state_snapshots = 0;   // 0 = two per stream slot, the prefix cache's minimum
  tiling::BoosterLimits limits;  // the hardware profile's, recorded in the plan for kernel selection
  // [layer][expert] = the unit the expert's weights take within its layer (compiler/placement.h);
  // empty: the identity, every expert at its own id. Recorded as the plan's expert_order.units.
  std::vector<std::vector<int>> expert_units;
};

// Lays out the blob and the runtime buffers. Pure function of the chemistry and the options.
Plan plan_memory(const Chemistry& chem, const PlanOptions& opt);

}  // namespace rocket
