// CacheGeometry: the fixed shape of the prefix cache, derived from the plan and checked against it.
//
// Units. A *cache page* holds `page_tokens` consecutive tokens of one sequence for every
// full-attention layer, K and V: it is `layer_pages` plan pages (plan.kv_page_bytes each, one per
// (full-attention layer, K|V)). The page is the sharable unit: the radix tree, the pool and the
// stream page tables deal only in cache-page indices; the engine turns an index into arena offsets
// with kv_offset(). A *snapshot slot* holds the conv + recurrent state of every linear-attention
// layer at one token boundary (SnapshotLayout), 64 KiB aligned.
//
// Plain data; no thread-safety concerns.
#pragma once

#include <cstdint>

#include "fuel/chemistry.h"
#include "plan/plan.h"

namespace rocket {

// Where one snapshot's parts sit inside its slot. The order matches a stream slot's state in the
// arena (gdn_state then conv_state, each [linear layer][...] contiguous per stream), so capturing or
// restoring a stream's state is two contiguous copies.
struct SnapshotLayout {
  uint64_t recurrent_bytes = 0;  // linear_layers × v_heads × k_dim × v_dim × fp32
  uint64_t conv_bytes = 0;       // linear_layers × conv_dim × (conv_kernel − 1) × fp32

  uint64_t recurrent_offset() const { return 0; }
  uint64_t conv_offset() const { return recurrent_bytes; }
  uint64_t state_bytes() const { return recurrent_bytes + conv_bytes; }
  uint64_t slot_bytes() const;  // state_bytes rounded up to 64 KiB

  static SnapshotLayout of(const Chemistry& chem);
};

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
  // Offset, inside the plan's kv_cache buffer, of the plan page holding K (kv = 0) or V (kv = 1) of
  // full-attention layer ordinal `full_layer` for cache page `page`: a cache page's plan pages are
  // contiguous, layer-major.
  // REQUIRES: 0 <= page < pages, 0 <= full_layer < layer_pages / 2, kv in {0, 1}.
  uint64_t kv_offset(int page, int full_layer, int kv) const;

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
