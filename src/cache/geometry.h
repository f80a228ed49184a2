// CacheGeometry: the fixed shape of the prefix cache, derived from the plan and checked against it.
//
// Units. A *cache page* holds `page_tokens` consecutive tokens of one sequence for every
// full-attention layer, K and V: it is `layer_pages` plan pages (plan.kv_page_bytes each, one per
// (full-attention layer, K|V)). The page is the sharable unit: the radix tree, the pool and the
// stream page tables deal only in cache-page indices; the engine turns an index into arena offsets
// with KvLayout (cache/layout.h). A *snapshot slot* holds the conv + recurrent state of every
// linear-attention layer at one token boundary (SnapshotLayout), 64 KiB aligned.
//
// Plain data; no thread-safety concerns.
#pragma once

#include <cstdint>

#include "cache/layout.h"
#include "fuel/chemistry.h"
#include "plan/plan.h"

namespace rocket {

struct CacheGeometry {
  int page_tokens = 0;             // tokens per cache page (= plan.kv_page_tokens)
  int pages = 0;                   // cache pages in the pool
  int layer_pages = 0;             // plan KV pages per cache page: 2 × full-attention layers
  uint64_t layer_page_bytes = 0;   // one plan KV page (= plan.kv_page_bytes)
  int snapshot_slots = 0;          // recurrent-state snapshots kept (a serving parameter)
  uint64_t snapshot_bytes = 0;     // one slot, 64 KiB aligned
  int max_context = 0;             // tokens per stream

  uint64_t page_bytes() const { return uint64_t(layer_pages) * layer_page_bytes; }
  uint64_t kv_bytes() const { return uint64_t(pages) * page_bytes(); }
  uint64_t snapshot_region_bytes() const { return uint64_t(snapshot_slots) * snapshot_bytes; }
  int pages_for(int64_t tokens) const { return int((tokens + page_tokens - 1) / page_tokens); }

  // Derives the geometry of `plan` keeping `snapshot_slots` snapshots, then validate(plan).
  static CacheGeometry from_plan(const Plan& plan, int snapshot_slots);
  // Self-consistency (positive sizes, 64 KiB multiples, one stream at max_context fits).
  // Error naming the field otherwise.
  void validate() const;
  // validate() plus agreement with the plan: page tokens and bytes, pages × page bytes equal to the
  // plan's kv_cache buffer, snapshot size from the chemistry, enough snapshot slots for every stream.
  // Error naming the field, expected and found.
  void validate(const Plan& plan) const;
};

}  // namespace rocket
