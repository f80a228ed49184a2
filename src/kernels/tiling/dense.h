// Tiling of the dense projections (kernels/cuda/dense.cuh, which explains the two forms and the
// measurements behind each rule): a function of the shape, the bucket and the booster.
#pragma once

#include <cstdint>

#include "kernels/tiling/booster.h"
#include "kernels/tiling/kernel_tiles.h"
#include "kernels/tiling/weight_tile.h"

namespace rocket::tiling {

// The register form: a warp owns one 16-row tile over one K part of g stages.
struct DenseTiling {
  int stages = 0, g = 0, parts = 0, tiles = 0;
  int max_warps_per_tile = 0, warps_per_tile = 0, rounds = 0, tiles_per_block = 0;
  int warps = 0, threads = 0, blocks = 0, min_blocks = 0, row_groups = 0, smem_bytes = 0;
  uint64_t weight_read_bytes = 0;  // the last tile reads all 16 of its rows

  constexpr KernelTiles tiles_of() const {
    return KernelTiles{.grid = blocks, .threads = threads, .smem_bytes = smem_bytes}
        .with("form", 0)
        .with("stages_per_warp", g)
        .with("warps_per_tile", warps_per_tile)
        .with("rounds", rounds)
        .with("tiles_per_block", tiles_per_block)
        .with("min_blocks", min_blocks);
  }
};

// The largest bucket the register form runs (the compiler refuses larger --max-streams for h200).
inline constexpr int kDenseMaxRows = 64;
// Rows of an FP8 LM head the token path dequantises and multiplies at a time (whole 128-row scale
// blocks; 32 MiB as BF16 at a3b's hidden size, no more than its largest FP8 projection's copy).
inline constexpr int kLmHeadSliceRows = 8192;

// Registers per thread the register form is built for: 64 up to 32 token rows (1024 threads per SM);
// 128 past them, where eight row groups' accumulators (32 registers) beside the stages do not fit 64.
constexpr int dense_registers_per_thread(int b) { return b <= 32 ? 64 : 128; }

constexpr DenseTiling dense_registers(int n, int k, int b, const BoosterLimits& hw, Precision p = Precision::kBF16) {
  DenseTiling t;
  t.stages = stages(p, k);
  // Threads per SM at the register budget (Hopper's register file: 64K 32-bit registers per SM).
  const int sm_threads = 65536 / dense_registers_per_thread(b);
  // NOTE: up to 8 loads of 16 bytes per lane in flight (4 KiB per warp) as the MoE experts use; with
  // 32 warps resident per SM that is 128 KiB per SM, well past the ~35 KiB per SM that Little's law
  // asks of 4.3 TB/s at ~1 us loaded latency, at a 64-register budget. At 16 token rows the second
  // row group's accumulators still fit (dense_check: LM head 296 -> 273 us, 8192x2048 13.1 -> 11.1 us
  // against half the stages); at 32 they take the budget (spills): half the stages (64 KiB per SM).
  // Past 32 rows the budget doubles and the residency halves: 16 warps x 4 KiB, again 64 KiB per SM.
  // Block FP8 up to 32 rows: 2 stages. A 16-byte load holds 16 e4m3 columns, so at 4 stages a shape
  // has half the warps of its bf16 form and runs in about one wave, its loads then its dequantisation
  // with little overlap; at 2 stages the warps double and one warp's math overlaps another's loads
  // (dense_fp8_check, H100, B=1: q_proj 8192x2048 7.82 -> 7.05 us, q|k|v 10.01 -> 8.21, o_proj 4.70 ->
  // 4.32, shared down 1.84 -> 1.54; B=16 q_proj 10.67 -> 9.75; B=64 28.56 -> 30.24, so not past 32).
  const int g_max = p == Precision::kFP8Block && b <= 32 ? 2 : b <= 16 ? 4 : b <= 32 ? 2 : 4;
  t.g = min(t.stages, g_max);
  t.parts = t.stages / t.g;
  t.tiles = ceil_div(n, 16);
  // NOTE: a shape with at most one tile per SM gets up to 32 warps per tile so its whole matrix is in
  // flight in one wave (o_proj 2048x4096: 128 blocks x 32 warps x 4 KiB = 16 MiB); any other gets 16,
  // so two blocks share an SM: one wave up to 264 tiles (in_proj_z), and past that one block's
  // reduction tail overlaps the other's loads. At the 128-register budget an SM holds 16 warps.
  t.max_warps_per_tile = min(t.tiles <= hw.sms ? 32 : 16, sm_threads / 32);
  t.warps_per_tile = min(t.parts, t.max_warps_per_tile);
  t.rounds = t.parts / t.warps_per_tile;  // K parts a warp walks one after another
  // Short K (few parts per tile): several tiles per block, but never so many that the grid gets
  // fewer blocks than SMs.
  const int tiles_per_block_cap = t.max_warps_per_tile / t.warps_per_tile;
  const int tiles_per_sm = t.tiles / hw.sms;
  t.tiles_per_block = tiles_per_sm < 1 ? 1 : min(tiles_per_sm, tiles_per_block_cap);
  t.warps = t.warps_per_tile * t.tiles_per_block;
  t.threads = t.warps * 32;
  t.blocks = ceil_div(t.tiles, t.tiles_per_block);
  // Register budget: threads * min_blocks = the SM's threads at dense_registers_per_thread.
  t.min_blocks = t.threads >= sm_threads ? 1 : sm_threads / t.threads;
  t.row_groups = ceil_div(b, 8);  // mma N = 8 token rows
  // Per-warp C fragments for the cross-warp sum; none when a tile has a single warp.
  t.smem_bytes = t.warps_per_tile > 1 ? t.warps * t.row_groups * 32 * 16 : 0;
  t.weight_read_bytes = uint64_t(t.tiles) * 16 * row_bytes(p, k);
  return t;
}

// The stream form: one persistent block per SM, a producer warp filling a ring of shared-memory
// stages with 16-row weight chunks, x in shared memory.
struct DenseStreamTiling {
  int tiles = 0, chunk_k = 0, chunks = 0, row_bytes = 0, row_stride = 0, stage_bytes = 0, steps = 0;
  int consumers = 0, threads = 0, row_groups = 0, x_stride = 0, red_bytes = 0, max_ring = 0, limit = 0;
  int x_bytes = 0, ring = 0, smem_bytes = 0, blocks = 0;
  bool fits = false, chosen = false;

  constexpr KernelTiles tiles_of() const {
    return KernelTiles{.grid = blocks, .threads = threads, .smem_bytes = smem_bytes}
        .with("form", 1)
        .with("chunk_k", chunk_k)
        .with("ring_stages", ring)
        .with("consumer_warps", consumers);
  }
};

// `tiles`: the 16-row tiles of every segment of the launch.
constexpr DenseStreamTiling dense_stream(int k, int b, int tiles, const BoosterLimits& hw) {
  DenseStreamTiling t;
  t.tiles = tiles;
  t.chunk_k = min(k, 1024);  // columns per chunk (per bulk copy of a row)
  t.chunks = k / t.chunk_k;  // chunks per tile
  t.row_bytes = 2 * t.chunk_k;
  // NOTE: rows 64 bytes apart modulo 128, so the 8 lanes of a 16-byte load phase (rows g, g + 1 at
  // four column offsets) hit 8 distinct 16-byte bank groups.
  t.row_stride = t.row_bytes + 64;
  t.stage_bytes = 16 * t.row_stride;
  t.steps = t.chunk_k / 32;  // 32-column steps (two mma k16) per chunk
  t.consumers = min(t.steps, 8);
  t.threads = (t.consumers + 1) * 32;
  t.row_groups = ceil_div(b, 8);
  t.x_stride = 2 * k + 64;
  t.red_bytes = 2 * t.consumers * t.row_groups * 32 * 16;  // two tiles' partials
  t.max_ring = 6;
  t.limit = hw.smem_per_block - t.red_bytes - 2 * t.max_ring * 8;
  t.x_bytes = b * t.x_stride;
  // The form's rule (dense.cuh, at the top).
  t.fits = t.x_bytes + 3 * t.stage_bytes <= t.limit;
  t.chosen = t.fits && b <= 16 && t.chunk_k == 1024 && t.tiles >= 64 * hw.sms;
  t.ring = !t.fits ? 0 : min((t.limit - t.x_bytes) / t.stage_bytes, t.max_ring);
  t.smem_bytes = t.ring * t.stage_bytes + t.x_bytes + t.red_bytes + 2 * t.ring * 8;
  t.blocks = min(t.tiles, hw.sms);
  return t;
}

// The launch a projection (or a group of projections of the same x, `tiles` 16-row tiles in all) of
// weights in precision p gets: the stream form where its rule chooses it (bf16 only), the register
// form otherwise.
constexpr KernelTiles dense_tiles(int k, int b, int tiles, const BoosterLimits& hw, Precision p = Precision::kBF16) {
  const DenseStreamTiling s = dense_stream(k, b, tiles, hw);
  return p == Precision::kBF16 && s.chosen ? s.tiles_of() : dense_registers(16 * tiles, k, b, hw, p).tiles_of();
}

}  // namespace rocket::tiling
