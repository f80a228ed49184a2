#include "engine/upright.h"

#include <fmt/format.h>

#include "boosters/topology.h"
#include "core/error.h"

namespace rocket {

void check_plan(const Plan& plan, const EngineBuild& built) {
  if (const std::string why = unbuilt_arrangement(plan); !why.empty()) fail("upright: {}", why);
  const int split = plan.boosters.arrangement == kSplit ? plan.boosters.count : 1;
  if (split != built.split_boosters)
    fail("upright: the plan is {}, this engine was built {} (rebuild the engine)",
         split > 1 ? fmt::format("split over {} boosters", split) : std::string("one engine per booster"),
         built.split_boosters > 1 ? fmt::format("split over {} boosters", built.split_boosters) : std::string("for one booster"));
  if (plan.fingerprint != built.fingerprint)
    fail("upright: plan chemistry {} does not match this engine's chemistry {} (rebuild the engine)", plan.fingerprint,
         built.fingerprint);
  if (plan.booster != built.booster)
    fail("upright: plan is for booster '{}', this engine is '{}'", plan.booster, built.booster);
  if (plan.blob_bytes != built.blob_bytes || plan.arena_bytes != built.arena_bytes)
    fail("upright: plan memory map (blob {} / arena {}) differs from the one this engine was built from (blob {} / arena {})",
         plan.blob_bytes, plan.arena_bytes, built.blob_bytes, built.arena_bytes);
  const uint64_t kv_pages = uint64_t(built.slots) * built.pages_per_stream * 2 * built.kv_layers;
  if (uint64_t(plan.kv_pages) != kv_pages)
    fail("upright: the plan's {} KV pages are not {} slots x {} pages x {} layer pages", plan.kv_pages, built.slots,
         built.pages_per_stream, 2 * built.kv_layers);
  if (!built.maps_expert_units) {
    // Unless the blob's routers already choose units (Plan::router_in_unit_order).
    if (!plan.expert_order.units.empty() && !plan.router_in_unit_order())
      fail("upright: the plan orders the experts in the blob (expert_order, from {}), and this engine does not map expert "
           "ids to units: rebuild without --coactivation", plan.expert_order.source);
    return;
  }
  for (int l = 0; l < plan.chemistry.layers; ++l)
    for (int e = 0; e < plan.chemistry.experts; ++e) {
      const int want = size_t(l) < built.expert_units.size() && size_t(e) < built.expert_units[size_t(l)].size()
                           ? built.expert_units[size_t(l)][size_t(e)]
                           : -1;
      if (plan.expert_unit(l, e) != want)
        fail("upright: the plan puts layer {}'s expert {} at unit {}, this engine was built with unit {} (rebuild the engine)",
             l, e, plan.expert_unit(l, e), want);
    }
}

}  // namespace rocket
