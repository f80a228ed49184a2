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
  int draft_tokens = 0;      // Plan::draft_tokens: 0, or the MTP layer's tokens per draft
  tiling::BoosterLimits limits;  // the hardware profile's, recorded in the plan for kernel selection
  // [layer][expert] = the unit the expert's weights take within its layer (compiler/placement.h);
  // empty: the identity, every expert at its own id. Recorded as the plan's expert_order.units.
  std::vector<std::vector<int>> expert_units;
  // Plan::vision: the tower the blob carries. An h200 plan lowers its processor's max_pixels to what one
  // prefill piece holds (bound_pixels_by_prefill_chunk) and refuses a head_dim its kernels lack.
  std::optional<PlanVision> vision;
};

// Lays out the blob and the runtime buffers. Pure function of the chemistry and the options.
Plan plan_memory(const Chemistry& chem, const PlanOptions& opt);

// The decode buckets 1, 2, 4, ... max_streams.
std::vector<int> buckets_up_to(int max_streams);

// The largest bucket an h200 plan decodes when --max-streams is not given: the most its decode
// kernels run (kernels/tiling/dense.h) whose whole arena (each slot's KV for the full context, its
// recurrent state, the cache's two snapshots per stream) fits `usable` bytes, halving down to 32.
// Snapshots the options fix are honoured: a bucket they cannot serve two per stream is not taken.
int h200_max_streams(const Chemistry& chem, PlanOptions opt, uint64_t usable);

}  // namespace rocket
