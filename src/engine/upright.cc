#include "engine/upright.h"

#include "core/error.h"

namespace rocket {

void check_plan(const Plan& plan, const EngineBuild& built) {
  if (plan.fingerprint != built.fingerprint)
    fail("upright: plan chemistry {} does not match this engine's chemistry {} (rebuild the engine)", plan.fingerprint,
         built.fingerprint);
  if (plan.booster != built.booster)
    fail("upright: plan is for booster '{}', this engine is '{}'", plan.booster, built.booster);
  if (plan.blob_bytes != built.blob_bytes || plan.arena_bytes != built.arena_bytes)
    fail("upright: plan memory map (blob {} / arena {}) differs from the one this engine was built from (blob {} / arena {})",
         plan.blob_bytes, plan.arena_bytes, built.blob_bytes, built.arena_bytes);
  const uint64_t kv_pages = uint64_t(built.slots) * built.pages_per_stream * 2 * built.full_layers;
  if (uint64_t(plan.kv_pages) != kv_pages)
    fail("upright: the plan's {} KV pages are not {} slots x {} pages x {} layer pages", plan.kv_pages, built.slots,
         built.pages_per_stream, 2 * built.full_layers);
}

}  // namespace rocket
