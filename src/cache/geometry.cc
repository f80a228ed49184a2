#include "cache/geometry.h"

#include "core/align.h"
#include "core/error.h"

namespace rocket {

SnapshotLayout SnapshotLayout::of(const Chemistry& c) {
  const uint64_t layers = uint64_t(c.linear_layers());
  return {.recurrent_bytes = layers * c.lin_v_heads * c.lin_k_dim * c.lin_v_dim * 4,
          .conv_bytes = layers * c.conv_dim() * (c.conv_kernel - 1) * 4};
}

CacheGeometry CacheGeometry::from_plan(const Plan& plan, int snapshot_slots) {
  const int layer_pages = 2 * plan.kv_layers();
  CacheGeometry g{.page_tokens = plan.kv_page_tokens,
                  .pages = layer_pages > 0 ? plan.kv_pages / layer_pages : 0,
                  .layer_pages = layer_pages,
                  .layer_page_bytes = plan.kv_page_bytes,
                  .snapshot_slots = snapshot_slots,
                  .snapshot_bytes = SnapshotLayout::of(plan.chemistry).slot_bytes(),
                  .max_context = plan.max_context};
  if (layer_pages > 0 && plan.kv_pages % layer_pages != 0)
    fail("cache geometry: the plan's {} KV pages are not a whole number of cache pages of {} plan pages "
         "(2 × {} full-attention layers with KV)", plan.kv_pages, layer_pages, plan.kv_layers());
  g.validate(plan);
  return g;
}

void CacheGeometry::validate() const {
  if (page_tokens <= 0) fail("cache geometry: page_tokens {} must be positive", page_tokens);
  if (layer_pages <= 0 || layer_pages % 2 != 0)
    fail("cache geometry: layer_pages {} must be a positive even count (K and V per full-attention layer)",
         layer_pages);
  if (layer_page_bytes == 0 || !is_aligned(layer_page_bytes))
    fail("cache geometry: layer page bytes {} must be a positive 64 KiB multiple", layer_page_bytes);
  if (snapshot_slots <= 0) fail("cache geometry: snapshot_slots {} must be positive", snapshot_slots);
  if (snapshot_bytes == 0 || !is_aligned(snapshot_bytes))
    fail("cache geometry: snapshot bytes {} must be a positive 64 KiB multiple", snapshot_bytes);
  if (max_context <= 0) fail("cache geometry: max_context {} must be positive", max_context);
  // NOTE: below this one stream could never reach max_context even with the whole cache evicted.
  if (pages < pages_for(max_context))
    fail("cache geometry: {} pages of {} tokens cannot hold one stream at max_context {} (needs {})", pages,
         page_tokens, max_context, pages_for(max_context));
}

void CacheGeometry::validate(const Plan& plan) const {
  validate();
  if (page_tokens != plan.kv_page_tokens)
    fail("cache geometry: page_tokens {} but the plan's KV pages hold {} tokens", page_tokens, plan.kv_page_tokens);
  if (layer_page_bytes != plan.kv_page_bytes)
    fail("cache geometry: layer page bytes {} but the plan's KV page is {} bytes", layer_page_bytes,
         plan.kv_page_bytes);
  if (layer_pages != 2 * plan.kv_layers())
    fail("cache geometry: {} plan pages per cache page but the plan keeps KV for {} full-attention layers (K and V)",
         layer_pages, plan.kv_layers());
  const PlanBuffer& kv = plan.buffer("kv_cache");
  if (kv_bytes() != kv.bytes || uint64_t(pages) * layer_pages != uint64_t(plan.kv_pages))
    fail("cache geometry: {} pages × {} bytes = {} bytes but the plan's kv_cache buffer is {} bytes ({} plan pages)",
         pages, page_bytes(), kv_bytes(), kv.bytes, plan.kv_pages);
  if (max_context != plan.max_context)
    fail("cache geometry: max_context {} but the plan's is {}", max_context, plan.max_context);
  const uint64_t want = SnapshotLayout::of(plan.chemistry).slot_bytes();
  if (snapshot_bytes != want)
    fail("cache geometry: snapshot slot of {} bytes but the chemistry's conv + recurrent state needs {}",
         snapshot_bytes, want);
  // NOTE: an active stream pins at most two snapshots (the one it resumed from, under its lock, and
  // the one it captured last); with fewer slots than that, captures start failing at full load.
  if (snapshot_slots < 2 * plan.max_streams)
    fail("cache geometry: {} snapshot slots cannot serve {} streams (needs at least {})", snapshot_slots,
         plan.max_streams, 2 * plan.max_streams);
  const PlanBuffer& region = plan.buffer("state_snapshots");
  if (snapshot_slots > plan.state_snapshots || snapshot_region_bytes() > region.bytes)
    fail("cache geometry: {} snapshot slots ({} bytes) but the plan's state_snapshots region holds {} ({} bytes)",
         snapshot_slots, snapshot_region_bytes(), plan.state_snapshots, region.bytes);
}

}  // namespace rocket
