// Tiling of the Gated DeltaNet recurrent step (kernels/cuda/gdn.cuh): a value head's Vd columns over
// a cluster of blocks, four threads per column, so a thread holds 8 state rows of 4 columns whatever
// the width.
#pragma once

#include "kernels/tiling/booster.h"
#include "kernels/tiling/kernel_tiles.h"

namespace rocket::tiling {

struct GdnTiling {
  int columns = 0;     // of a value head per block
  int split = 0;       // blocks (a cluster) per value head
  int col_vecs = 0;    // lanes across a row slice
  int threads = 0, warps = 0;
  int row_groups = 0;
  int rows = 0;        // state rows per thread: 4 * rows floats in registers
};

constexpr GdnTiling gdn_tiling(int k_dim, int v_dim, int want_columns) {
  GdnTiling t;
  t.columns = min(v_dim, want_columns);
  t.split = v_dim / t.columns;
  t.col_vecs = t.columns / 4;
  t.threads = t.columns * 4;
  t.warps = t.threads / 32;
  t.row_groups = t.threads / t.col_vecs;
  t.rows = k_dim / t.row_groups;
  return t;
}

// NOTE: at one row, 32 columns per block (a state row's slice is one 128-byte line, 8 lanes of
// float4) turn a 128 x 128 head into a cluster of 4 blocks: bucket 1 gets 128 blocks, one per SM,
// instead of 32. From kGdnWideRows rows there are blocks enough with wider slices; gdn_check (a3b,
// h200-kernels.md) measured 64 columns (clusters of 2, 256 threads) fastest: B=8 12.5 -> 9.8 us,
// B=32 47.4 -> 43.4 us, against 10.1 / 44.9 us for a whole head per block.
constexpr int kGdnWideRows = 8;
constexpr int kGdnPrefillColumns = 32;
constexpr int gdn_decode_columns(int b) { return b >= kGdnWideRows ? 64 : 32; }

// Static shared memory of the kernel for `tokens` tokens a launch (gdn.cuh GdnSmem, field by field).
constexpr int gdn_smem_bytes(const GdnTiling& t, int k_dim, int tokens) {
  const int floats = tokens * 2 * k_dim + 2 * tokens * t.columns + 2 * t.warps * t.columns + tokens * 2 * (k_dim / 32) +
                     tokens * 2 + tokens * 2 + 2 * tokens + t.columns;
  return 4 * floats + 2 * tokens * t.columns;
}

constexpr KernelTiles gdn_decode_tiles(int v_heads, int k_dim, int v_dim, int b) {
  const GdnTiling t = gdn_tiling(k_dim, v_dim, gdn_decode_columns(b));
  return KernelTiles{.grid = int64_t(b) * v_heads * t.split, .threads = t.threads, .smem_bytes = gdn_smem_bytes(t, k_dim, 1)}
      .with("columns", t.columns)
      .with("cluster", t.split)
      .with("state_rows_per_thread", t.rows);
}


// ---------------------------------------------------------------------------------------------------
// The chunked rule over a prefill piece (kernels/cuda/gdn_chunked.cuh): chunks of kGdnChunk tokens at
// absolute positions that are multiples of it; the sequential-over-chunks kernel splits a value head's
// columns over blocks of kGdnChunkedColumns.
constexpr int kGdnChunk = 64;
constexpr int kGdnChunkedColumns = 32;

// Chunks a piece of `tokens` tokens spans at any first position: the first may hold one token.
constexpr int gdn_chunks(int tokens) { return (tokens + 2 * kGdnChunk - 2) / kGdnChunk; }

// What the intra-chunk kernel leaves for one (chunk, value head), in floats: Wᵀ, (G ⊙ Q)ᵀ and
// K ⊙ G_C/G (Kd x C each), U (C x Vd), the masked (Q Kᵀ ⊙ G_t/G_i)ᵀ (C x C) and G_C (padded to 4).
constexpr int64_t gdn_chunk_floats(int k_dim, int v_dim) {
  return 3 * int64_t(k_dim) * kGdnChunk + int64_t(kGdnChunk) * v_dim + int64_t(kGdnChunk) * kGdnChunk + 4;
}

// The workspace of gdn_chunked for pieces of up to max_tokens tokens: the chunks' records, then the
// core output before the gated norm (fp32 [tokens][Hv][Vd]).
constexpr int64_t gdn_chunked_workspace_floats([[maybe_unused]] int k_heads, int v_heads, int k_dim, int v_dim, int max_tokens) {
  return int64_t(gdn_chunks(max_tokens)) * v_heads * gdn_chunk_floats(k_dim, v_dim) + int64_t(max_tokens) * v_heads * v_dim;
}

}  // namespace rocket::tiling
