// Tiling of the MoE kernels (kernels/cuda/moe_dispatch.cuh, moe_experts.cuh, which carry the
// measurements behind each rule): the route's layout, the dispatch block, and how the grouped
// expert kernels spread their 16-row weight tiles over warps, blocks and K slices.
#pragma once

#include <cstdint>

#include "kernels/tiling/booster.h"
#include "kernels/tiling/kernel_tiles.h"
#include "kernels/tiling/weight_tile.h"

namespace rocket::tiling {

// The MoE shapes of one chemistry.
struct MoeDims {
  int hidden = 0, inter = 0, shared_inter = 0, experts = 0, top_k = 0;
};

// moe_dispatch.cuh MoeRoute: active, expert[max_active], start[max_active + 1], slot_row and
// slot_of [slots], all int.
struct MoeRouteLayout {
  int slots = 0, max_active = 0;
  constexpr int64_t ints() const { return 1 + max_active + max_active + 1 + 2 * int64_t(slots); }
};

constexpr MoeRouteLayout moe_route_layout(const MoeDims& d, int b) {
  const int slots = b * d.top_k;
  return {slots, min(d.experts, slots)};
}

struct MoeDispatchTiling {
  int route_rows = 0;  // moe_route: router and grouping in one kernel up to this many rows
  int slots = 0, widest = 0, group_threads = 0, route_threads = 0, threads = 0, warps = 0;
  bool fused = false;
};

constexpr MoeDispatchTiling moe_dispatch_tiling(const MoeDims& d, int b) {
  MoeDispatchTiling t;
  t.route_rows = 8;
  t.slots = b * d.top_k;
  t.widest = max(d.experts, t.slots);
  // One thread per slot and per expert; when routing here, also one warp per row.
  t.group_threads = ceil_div(t.widest, 32) * 32;
  t.route_threads = b <= t.route_rows ? 32 * b : 0;
  t.threads = max(t.group_threads, t.route_threads);
  t.warps = t.threads / 32;
  t.fused = b <= t.route_rows;
  return t;
}

// The grouping kernel (fused with the router's top-k up to route_rows rows): one block.
constexpr KernelTiles moe_route_tiles(const MoeDims& d, int b) {
  const MoeDispatchTiling t = moe_dispatch_tiling(d, b);
  return KernelTiles{.grid = 1, .threads = t.threads, .smem_bytes = 0}.with("fused_router", t.fused ? 1 : 0);
}

// How the 16-row tiles of one entry's matrix (rows x k) map onto warps and blocks. Every warp holds g
// stages in flight (`loads` 16-byte loads per lane, m tiles of two row halves); the `parts`
// warp-sized pieces of a tile's K are spread over warps_per_tile warps of a block, `rounds` after
// another, and over `slices` blocks.
struct ExpertTiles {
  int stages = 0, g = 0, part_k = 0, parts = 0, warps_per_tile = 0, tiles_per_block = 0, rounds_total = 0;
  int slices = 0, rounds = 0, tiles = 0, groups = 0, blocks = 0;
};

constexpr ExpertTiles expert_tiles(Precision p, int k, int rows, int m, int warps, int slices, int loads = 8) {
  ExpertTiles t;
  t.stages = stages(p, k);
  t.g = min(loads / (2 * m), t.stages);
  t.part_k = t.g * stage_k(p);
  t.parts = t.stages / t.g;
  t.warps_per_tile = min(warps, t.parts);
  t.tiles_per_block = warps / t.warps_per_tile;
  t.rounds_total = t.parts / t.warps_per_tile;
  t.slices = slices;
  t.rounds = t.rounds_total / slices;
  t.tiles = rows / 16;
  t.groups = ceil_div(t.tiles, t.tiles_per_block);
  t.blocks = t.groups * slices;
  return t;
}

struct MoeGateUpTiling {
  bool narrow = false, small_blocks = false;
  int warps = 0, threads = 0, min_blocks = 0, slots = 0, n_tiles = 0, routed_loads = 0;
  ExpertTiles routed, shared;
  int shared_rounds = 0, shared_slices = 0;
  int64_t blocks = 0;
  int smem_bytes = 0, partial_floats = 0, arrivals = 0;

  constexpr KernelTiles tiles_of() const {
    return KernelTiles{.grid = blocks, .threads = threads, .smem_bytes = smem_bytes}
        .with("warps", warps)
        .with("min_blocks", min_blocks)
        .with("routed_stages_per_warp", routed.g)
        .with("shared_slices", shared_slices)
        .with("workspace_bytes", int64_t(partial_floats) * 4)
        .with("arrival_counters", arrivals);
  }
};

// `experts`, `shared`: the precisions of the routed experts and of the shared expert.
constexpr MoeGateUpTiling moe_gate_up_tiling(const MoeDims& d, int b, Precision experts, Precision shared) {
  MoeGateUpTiling t;
  const bool nvfp4 = experts == Precision::kNVFP4;
  // NOTE: blocks of 8 warps, three resident (<= 80 registers), each warp two stages of gate and up (8
  // loads of 16 bytes per lane) in one round. At B = 1 the a3b NVFP4 grid is ~2.9 blocks per SM, so
  // that makes it one wave. From bucket 8 NVFP4 tiles are many and the kernel waits on its decode as
  // much as on HBM (ncu at B = 16: 0.47 issued warps per scheduler, long scoreboard 39% of stalls):
  // narrow rounds of one stage (4 loads per lane) fit 64 registers, so 32 warps per SM decode side by
  // side (moe_check a3b nvfp4 random, gate_up: B=16 41.4 -> 39.8 us, B=32 77.6 -> 63.0 us; B=1 7.6 ->
  // 8.2 us, so not there). bf16 experts have no decode to hide; FP8 experts (one conversion per two
  // weights) keep the bf16 rules, not measured apart.
  // Blocks of 4 warps taking a tile's K in four narrow rounds each (eight blocks per SM) are faster
  // still alone (moe_check: B=8 24.0 -> 22.8, B=16 39.8 -> 37.9, B=32 63.0 -> 57.9 us), and in the
  // engine's step at buckets 8 and 32 (3.79 -> 3.74, 8.12 -> 8.03 ms), but not at 16: there the
  // step got slower (5.42 -> 5.45 ms) although its MoE timed alone got faster (2.78 -> 2.68 ms), the
  // loss is in how it meets its neighbours, cause not found (h200-a3b.md History 00:20Z).
  t.narrow = nvfp4 && b >= 8;
  t.small_blocks = t.narrow && b != 16;  // blocks of 4 warps
  t.warps = t.small_blocks ? 4 : 8;
  t.threads = t.warps * 32;
  t.min_blocks = t.narrow ? 32 / t.warps : 3;  // narrow: 32 warps per SM at 64 registers
  t.slots = b * d.top_k;
  t.n_tiles = ceil_div(b, 8);  // groups of 8 rows: an expert has at most B rows
  t.routed_loads = t.narrow ? 4 : 8;
  t.routed = expert_tiles(experts, d.hidden, d.inter, 2, t.warps, 1, t.routed_loads);
  // NOTE: a bf16 shared expert streams more bytes per tile than an NVFP4 expert; splitting its K
  // over as many blocks as it has extra rounds keeps every block of the grid one equal round long.
  t.shared_rounds = expert_tiles(shared, d.hidden, d.shared_inter, 2, t.warps, 1).rounds_total;
  t.shared_slices = t.shared_rounds > t.routed.rounds_total && t.shared_rounds % t.routed.rounds_total == 0
                        ? t.shared_rounds / t.routed.rounds_total
                        : 1;
  t.shared = expert_tiles(shared, d.hidden, d.shared_inter, 2, t.warps, t.shared_slices);
  t.blocks = 1 + t.shared.blocks + int64_t(moe_route_layout(d, b).max_active) * t.routed.blocks;
  t.smem_bytes = t.warps * t.n_tiles * 2 * 32 * 16;  // per-warp C fragments
  t.partial_floats = t.shared_slices > 1 ? t.shared.tiles * t.shared_slices * t.n_tiles * 2 * 32 * 4 : 1;
  t.arrivals = t.shared.groups;
  return t;
}

struct MoeDownTiling {
  bool pipelined = false, narrow = false;
  int warps = 0, threads = 0, slots = 0, n_tiles = 0, routed_loads = 0;
  ExpertTiles routed, shared;
  int blocks = 0;
  int y_stride = 0;  // a slot's 16 outputs, padded so a C-fragment store's 32 lanes hit 32 banks
  int smem_bytes = 0;

  constexpr KernelTiles tiles_of() const {
    return KernelTiles{.grid = blocks, .threads = threads, .smem_bytes = smem_bytes}
        .with("warps", warps)
        .with("routed_stages_per_unit", routed.g)
        .with("units_in_flight", pipelined ? 2 : 1);
  }
};

constexpr MoeDownTiling moe_down_tiling(const MoeDims& d, int b, Precision experts, Precision shared) {
  MoeDownTiling t;
  const bool nvfp4 = experts == Precision::kNVFP4;
  // NOTE: up to bucket 8, half an expert's K per unit (4 loads of 16 bytes per lane) with two units in
  // flight per warp (the next one's loads issued before this one's math): bucket 1 keeps 20 warps per
  // block busy instead of 12 (moe_check a3b nvfp4 B=1 down 5.3 -> 4.8 us, B=8 unchanged). From 16,
  // one unit at a time: NVFP4 half-K units at 32 warps (64 registers) decode side by side, as
  // moe_gate_up's narrow rounds (moe_check a3b nvfp4 random B=16 down 24.1 -> 22.0 us, B=32 35.0 ->
  // 33.3 us; half-K at 24 warps was slower than whole-K, 24.1 -> 24.5 us); bf16 experts keep whole-K
  // units at 24 warps (at 64 registers they spill).
  t.pipelined = b <= 8;
  t.narrow = nvfp4 && !t.pipelined;
  // NOTE: one block per 16 output columns is 128 blocks, one per SM: 24 warps (<= 85 registers)
  // rather than 16 keep more units in flight per SM; 32 for the narrow units.
  t.warps = t.narrow ? 32 : 24;
  t.threads = t.warps * 32;
  t.slots = b * d.top_k;
  t.n_tiles = ceil_div(b, 8);
  t.routed_loads = t.pipelined || t.narrow ? 4 : 8;
  t.routed = expert_tiles(experts, d.inter, d.hidden, 1, 1, 1, t.routed_loads);
  t.shared = expert_tiles(shared, d.shared_inter, d.hidden, 1, 1, 1);
  t.blocks = d.hidden / 16;
  t.y_stride = 20;
  t.smem_bytes = (t.routed.parts * t.slots + t.shared.parts * b) * t.y_stride * 4;
  return t;
}

// ---------------------------------------------------------------------------------------------------
// Prefill pieces (kernels/cuda/moe_piece.cuh): the piece's (token, choice) pairs sorted by expert, each
// expert's tokens cut into M-tiles ("items") of piece_tokens rows, grouped GEMMs over (item, N-tile).

struct MoePieceTiling {
  int tokens = 0;         // token rows per item (M-tile): 8 mma column groups of 8
  int gate_up_warps = 0;  // gate_up: a warp owns 16 intermediate rows of gate and the same 16 of up
  int gate_up_rows = 0;   // intermediate rows per gate_up block (16 * warps)
  int down_warps = 0;     // down: a warp owns 16 output columns in each half of its block's columns
  int down_rows = 0;      // output columns per down block (2 * 16 * warps)
  int gate_up_n_tiles = 0, down_n_tiles = 0;
  int group_threads = 0;  // grouping kernel: one warp per expert, every block scanning all counts
};

// Largest warp count in {8, 4, 2, 1} whose 16-row tiles (times `halves`) divide every one of a, b.
constexpr int moe_piece_warps(int a, int b, int halves) {
  int w = 8;
  while (w > 1 && (a % (16 * halves * w) != 0 || b % (16 * halves * w) != 0)) w /= 2;
  return w;
}

constexpr MoePieceTiling moe_piece_tiling(const MoeDims& d) {
  MoePieceTiling t;
  // NOTE: 64 tokens per item: at the a3b shape a 2048-token piece routes ~64 tokens to each expert, so
  // one item covers most experts' tokens (weights read once), and a warp's 8 x 2 accumulator tiles fit
  // two blocks per SM at 128 registers.
  t.tokens = 64;
  t.gate_up_warps = moe_piece_warps(d.inter, d.shared_inter, 1);
  t.gate_up_rows = 16 * t.gate_up_warps;
  t.down_warps = moe_piece_warps(d.hidden, d.hidden, 2);
  t.down_rows = 32 * t.down_warps;
  t.gate_up_n_tiles = max(d.inter, d.shared_inter) / t.gate_up_rows;
  t.down_n_tiles = d.hidden / t.down_rows;
  t.group_threads = max(256, ceil_div(d.experts, 32) * 32);
  return t;
}

// K columns per pipeline stage of a piece GEMM: a lane's share of a stage is kBK / 32 octets (8 columns
// each) of its weight rows, 8 code bytes (NVFP4) or 32 weight bytes (bf16) per row at kBK 64.
// NOTE: NVFP4 steps of 128 columns (16 code bytes a lane, one 128-bit load) need 16 more registers for
// the codes and spilled at 128 (two blocks per SM); at 64 a lane's 64-bit code loads are still
// conflict-free. Stages in flight: 5 NVFP4 (17 KiB each), 2 bf16 (40 KiB each), so two blocks share an SM.
// FP8 steps are 64 columns too (16 weight bytes a lane, 64-byte rows), 4 stages (24 KiB each).
constexpr int moe_piece_bk(Precision p, int k) {
  for (int bk = 64; bk >= 32; bk /= 2)
    if (k % bk == 0 && (p == Precision::kBF16 || bk == 64)) return bk;
  return 0;
}
constexpr int moe_piece_stages(Precision p) { return p == Precision::kNVFP4 ? 5 : p == Precision::kFP8Block ? 4 : 2; }

// Items of a piece of n tokens: routed ones (each active expert's ceil(count / tokens), at most
// slots / tokens + active of them) and the shared expert's (all n tokens).
constexpr int moe_piece_routed_items(const MoeDims& d, int n) {
  const int slots = n * d.top_k;
  return ceil_div(slots, moe_piece_tiling(d).tokens) + min(d.experts, slots);
}
constexpr int moe_piece_shared_items(const MoeDims& d, int n) { return ceil_div(n, moe_piece_tiling(d).tokens); }

// One workspace for a piece of up to max_tokens tokens; byte offsets, each 256-aligned. counts and bits
// come first: the only part that must be zero when the piece starts (moe_piece clears it itself).
struct MoePieceWorkspace {
  int bit_words = 0;  // per expert: one bit per token
  int max_items = 0;
  int64_t counts = 0;        // int [experts]: routed tokens per expert
  int64_t bits = 0;          // uint32 [experts][bit_words]: token t chose expert e
  int64_t expert_start = 0;  // int [experts + 1]: first slot of each expert
  int64_t item_count = 0;    // int: routed items
  int64_t items = 0;         // int4 [max_items]: expert, first slot, rows
  int64_t slot_token = 0;    // int [slots]: token of each slot
  int64_t slot_of = 0;       // int [max_tokens][top_k]: slot of (token, choice)
  int64_t shared_scale = 0;  // float [max_tokens]: sigmoid(shared_expert_gate . x)
  int64_t act = 0;           // bf16 [slots][inter]: silu(gate) * up by slot
  int64_t shared_act = 0;    // bf16 [max_tokens][shared_inter]
  int64_t y = 0;             // float [slots][hidden]: expert down projection by slot
  int64_t shared_y = 0;      // float [max_tokens][hidden]
  int64_t bytes = 0;
  constexpr int64_t zeroed_bytes() const { return expert_start; }
};

constexpr MoePieceWorkspace moe_piece_workspace(const MoeDims& d, int max_tokens) {
  MoePieceWorkspace w;
  const int64_t slots = int64_t(max_tokens) * d.top_k;
  w.bit_words = ceil_div(max_tokens, 32);
  w.max_items = moe_piece_routed_items(d, max_tokens);
  int64_t at = 0;
  auto take = [&at](int64_t bytes) {
    const int64_t here = at;
    at = (at + bytes + 255) / 256 * 256;
    return here;
  };
  w.counts = take(4 * int64_t(d.experts));
  w.bits = take(4 * int64_t(d.experts) * w.bit_words);
  w.expert_start = take(4 * (int64_t(d.experts) + 1));
  w.item_count = take(4);
  w.items = take(16 * int64_t(w.max_items));
  w.slot_token = take(4 * slots);
  w.slot_of = take(4 * slots);
  w.shared_scale = take(4 * int64_t(max_tokens));
  w.act = take(2 * slots * d.inter);
  w.shared_act = take(2 * int64_t(max_tokens) * d.shared_inter);
  w.y = take(4 * slots * d.hidden);
  w.shared_y = take(4 * int64_t(max_tokens) * d.hidden);
  w.bytes = at;
  return w;
}

}  // namespace rocket::tiling
