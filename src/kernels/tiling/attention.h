// Tiling of split-K paged attention (kernels/cuda/attention_decode.cuh): each (row, KV head)'s
// context cut into `splits` ranges, one block of `warps` warps each, merged by a combine kernel from a
// workspace of unnormalised partials.
#pragma once

#include <cstdint>

#include "kernels/tiling/booster.h"
#include "kernels/tiling/kernel_tiles.h"

namespace rocket::tiling {

struct AttentionTiling {
  int group = 0;            // query heads sharing one KV head
  int lanes_per_token = 0;  // 8 dims (16 bytes of bf16) per lane
  int tokens_per_step = 0;
  int steps = 0;            // tokens per lane per chunk
  int chunk = 0;            // tokens a warp takes at a time
  int warps = 0;
  int block_tokens = 0;
  int min_split_tokens = 0;
  int target_blocks = 0;
  int splits = 0;
  int64_t partial_floats = 0;  // workspace: outputs [rows][heads][splits][hd], then (max, sum)
  int smem_bytes = 0;          // static shared memory of the split kernel
};

constexpr AttentionTiling attention_tiling(int heads, int kv_heads, int head_dim, int rows) {
  AttentionTiling t;
  t.group = heads / kv_heads;
  t.lanes_per_token = head_dim / 8;
  t.tokens_per_step = 32 / t.lanes_per_token;
  t.steps = 4;  // 4 K and 4 V loads in flight
  t.chunk = t.steps * t.tokens_per_step;
  t.warps = 4;
  t.block_tokens = t.warps * t.chunk;
  // NOTE: a split shorter than two block passes spends more on its query setup and partial than on
  // KV, so short contexts use fewer splits rather than shorter ones.
  t.min_split_tokens = 2 * t.block_tokens;
  // NOTE: ~2 blocks per SM on the H200 when every row is long; fixed per bucket, so the grid never
  // depends on the context lengths.
  t.target_blocks = 256;
  t.splits = max(t.target_blocks / (rows * kv_heads), 1);
  t.partial_floats = int64_t(rows) * heads * t.splits * (head_dim + 2);
  t.smem_bytes = 4 * (t.group * head_dim + head_dim + t.warps * (t.chunk * t.group + t.group) + t.warps * t.group * (head_dim + 2));
  return t;
}

constexpr KernelTiles attention_decode_tiles(int heads, int kv_heads, int head_dim, int b) {
  const AttentionTiling t = attention_tiling(heads, kv_heads, head_dim, b);
  return KernelTiles{.grid = int64_t(t.splits) * kv_heads * b, .threads = t.warps * 32, .smem_bytes = t.smem_bytes}
      .with("splits", t.splits)
      .with("tokens_per_lane", t.steps)
      .with("workspace_bytes", t.partial_floats * 4);
}

}  // namespace rocket::tiling
