// Where the cache's data lies in the plan's arena, the one layout of both engines: each engine
// instantiates it at compile time from its engine.h constants, the compiler sizes the snapshot region
// with it, and CacheGeometry (cache/geometry.h) checks the plan's buffers against it.
//
// Plain constexpr data with no dependency but the alignment quantum, so CUDA sources include it too.
#pragma once

#include <cstdint>

#include "core/align.h"

namespace rocket {

struct Chemistry;

// The kv_cache buffer. A cache page holds page_tokens tokens of one sequence for every full-attention
// layer: per layer one plan page of K, then one of V, layer-major, so a cache page's plan pages are
// contiguous (copy-on-extend walks them in order) and one layer's K pages sit a cache page apart.
struct KvLayout {
  int64_t full_layers = 0;
  uint64_t page_bytes = 0;  // one plan page (plan.kv_page_bytes): one layer's K or V of a cache page

  // The plan page holding K (kv = 0) or V (kv = 1) of full-attention layer ordinal `full_layer` for
  // cache page `page`, as an offset into kv_cache.
  constexpr uint64_t offset(int64_t page, int64_t full_layer, int kv) const {
    return ((uint64_t(page) * uint64_t(full_layers) + uint64_t(full_layer)) * 2 + uint64_t(kv)) * page_bytes;
  }
  // From one cache page to the next: the stride between a layer's K (or V) pages.
  constexpr uint64_t cache_page_bytes() const { return uint64_t(full_layers) * 2 * page_bytes; }
};

// A stream's reusable recurrent state, as one snapshot slot holds it: the GDN state of every
// linear-attention layer, then their conv state. The arena keeps a stream slot's state in that order
// too (gdn_state, conv_state: each [linear layer][...] contiguous per stream), so capturing or
// restoring a stream is two contiguous copies.
struct SnapshotLayout {
  uint64_t recurrent_bytes = 0;  // linear_layers × v_heads × k_dim × v_dim × fp32: one stream's gdn_state
  uint64_t conv_bytes = 0;       // linear_layers × conv_dim × (conv_kernel − 1) × fp32: one stream's conv_state

  // The recurrent part opens the slot; the conv part follows it.
  constexpr uint64_t conv_offset() const { return recurrent_bytes; }
  constexpr uint64_t state_bytes() const { return recurrent_bytes + conv_bytes; }
  constexpr uint64_t slot_bytes() const { return align_up(state_bytes()); }  // 64 KiB aligned

  static SnapshotLayout of(const Chemistry& chem);  // defined with CacheGeometry
};

}  // namespace rocket
