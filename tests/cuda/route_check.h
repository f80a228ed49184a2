// The host's side of a MoE route (moe_dispatch.cuh): the grouping of B rows' top-k choices that the
// GPU must have written, shared by the checks that produce routes (router_check, moe_check).
#pragma once

#include <cstdio>
#include <vector>

namespace rocket::check {

// True when `r` (a cuda::MoeRoute as downloaded) groups `idx` ([rows][top_k] expert ids) as
// moe_dispatch promises: active experts ascending, each expert's slots in ascending row order, and
// slot_of the inverse map. Prints the counts on a mismatch.
template <class Route>
bool route_matches_host(const Route& r, const std::vector<int>& idx, int experts, int top_k) {
  const int slots = int(idx.size());
  bool ok = true;
  int active = 0, slot = 0;
  std::vector<int> slot_of(slots, -1);
  for (int e = 0; e < experts && ok; ++e) {
    bool any = false;
    for (int s = 0; s < slots; ++s)
      if (idx[s] == e) {
        if (!any) ok &= active < Route::kMaxActive && r.expert[active] == e && r.start[active] == slot;
        any = true;
        ok &= r.slot_row[slot] == s / top_k;
        slot_of[s] = slot++;
      }
    active += any;
  }
  ok &= active <= Route::kMaxActive && r.active == active && r.start[active] == slots;
  for (int s = 0; s < slots; ++s) ok &= r.slot_of[s] == slot_of[s];
  if (!ok) std::printf("  route mismatch (%d active on the host, %d on the GPU)\n", active, r.active);
  return ok;
}

}  // namespace rocket::check
