// Grouped MoE experts on the H200, after moe_dispatch: every active expert's SwiGLU over exactly its
// routed rows, plus the shared expert scaled by sigmoid(shared_expert_gate(x)), summed into the MoE
// output with the router weights. Two kernels:
//
//   moe_gate_up  one block per (entry, group of 16-row tiles of the intermediate, K slice). Warps split
//                K; each holds its tile's gate and up weights in registers, reused for every group of 8
//                routed rows; the block sums its warps in a fixed order and writes silu(gate) * up in
//                bf16, by slot. The shared expert is one more entry over all B rows (its K may be split
//                across blocks as well: the last block to arrive sums the slices in slice order). Block
//                0 computes the shared expert's sigmoid gate.
//   moe_down     one block per 16 output columns, looping over every entry: each warp takes (entry,
//                K part) units round robin (up to bucket 8 with the next one's loads in flight during
//                this one's math) and writes the down projection of that entry's rows to shared
//                memory; then each output is shared_scale * shared + sum over its top-k choices (in
//                choice order) of weight * expert output, rounded once to bf16.
//
// Both are links of the step's chain of dependent launches (dependent_launch.cuh), with one exception
// to its contract: every gate_up block lets moe_down launch once it has waited for moe_dispatch, so
// down's blocks are scheduled as gate_up's drain and pull their weights (shared expert and the first
// active experts, from the route moe_dispatch had completed before down could launch) into L2 before
// their own wait, which returns once gate_up has completed and its writes are visible; nothing gate_up
// writes is read before that wait.
//
// Deterministic: no float atomics, every sum has a fixed order, so a graph replay is bit-exact.
// Graph-capturable: grids depend only on the bucket (sized for B * top_k active experts; blocks of
// entries past route->active exit at once), no host synchronisation, no allocation.
//
// Weights: routed experts in precision P (NVFP4 or block FP8 dequantised in registers, or bf16) inside
// their 64 KiB units (plan/layout.h ExpertAt); the shared expert in precision PS (bf16, or block FP8 as
// `-FP8` releases store it), its gate bf16 (chemistry.cc). Activations bf16, math fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "fuel/chemistry.h"
#include "kernels/cuda/booster.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"
#include "kernels/cuda/moe_dispatch.cuh"
#include "kernels/cuda/moe_shared_gate.cuh"
#include "kernels/cuda/primitives/reduce.cuh"
#include "kernels/cuda/primitives/smem_limit.cuh"
#include "kernels/cuda/primitives/weight_tile.cuh"
#include "kernels/tiling/moe.h"
#include "plan/layout.h"

namespace rocket::cuda {

// How the 16-row tiles of one entry's matrix (kRows x K, precision Q) map onto warps and blocks. Every
// warp holds kG stages in flight (kLoads x 16-byte loads per lane, kM tiles of two row halves); the
// kParts warp-sized pieces of a tile's K are spread over kWarpsPerTile warps of a block, kRounds after
// another, and over kSlices blocks.
template <Precision Q, int K, int kRows, int kM, int kWarps, int kSliceCount, int kLoads = 8>
struct ExpertTilePlan {
  using W = WeightTileTraits<Q>;
  static constexpr tiling::ExpertTiles kTiling = tiling::expert_tiles(Q, K, kRows, kM, kWarps, kSliceCount, kLoads);
  static constexpr int kStages = kTiling.stages;
  static constexpr int kG = kTiling.g;
  static constexpr int kPartK = kTiling.part_k;
  static constexpr int kParts = kTiling.parts;
  static constexpr int kWarpsPerTile = kTiling.warps_per_tile;
  static constexpr int kTilesPerBlock = kTiling.tiles_per_block;
  static constexpr int kRoundsTotal = kTiling.rounds_total;
  static constexpr int kSlices = kTiling.slices;
  static constexpr int kRounds = kTiling.rounds;
  static constexpr int kTiles = kTiling.tiles;
  static constexpr int kGroups = kTiling.groups;
  static constexpr int kBlocks = kTiling.blocks;
  static_assert(kRows % 16 == 0, "expert tile: rows come in mma tiles of 16");
  static_assert(K % W::kLoadK == 0, "expert tile: K must be a whole number of 16-byte lane loads");
  static_assert(kStages % kG == 0 && kParts % kWarpsPerTile == 0 && kRoundsTotal % kSlices == 0,
                "expert tile: K does not split evenly over warps and slices");
};

template <class D, int B>
struct MoeGateUpParams {
  const __nv_bfloat16* x = nullptr;        // [B][hidden] normalised hidden states
  const MoeRoute<D, B>* route = nullptr;   // from moe_dispatch
  const uint8_t* experts = nullptr;        // this layer's expert units: unit e at experts + e * expert_stride
  uint64_t expert_stride = 0;
  ExpertAt expert;                         // gate / up / down offsets inside a unit
  const void* shared_gate = nullptr;                  // [shared_inter][hidden] in the shared expert's precision
  const void* shared_up = nullptr;                    // [shared_inter][hidden]
  const __nv_bfloat16* shared_expert_gate = nullptr;  // [hidden]
  __nv_bfloat16* act = nullptr;            // [B * top_k][inter] silu(gate) * up by slot
  __nv_bfloat16* shared_act = nullptr;     // [B][shared_inter]
  float* shared_scale = nullptr;           // [B] sigmoid(shared_expert_gate . x)
  float* partial = nullptr;                // MoeGateUpTraits::kPartialFloats scratch
  int* arrivals = nullptr;                 // MoeGateUpTraits::kArrivals counters: zero before the first
                                           // launch, left zero by every launch
  const float* shared_gate_block_scale = nullptr;  // FP8 shared expert: its block scales
  const float* shared_up_block_scale = nullptr;
};

template <class D, int B>
struct MoeDownParams {
  const MoeRoute<D, B>* route = nullptr;
  const float* route_weight = nullptr;     // [B][top_k] renormalised router weights
  const uint8_t* experts = nullptr;
  uint64_t expert_stride = 0;
  ExpertAt expert;
  const void* shared_down = nullptr;           // [hidden][shared_inter] in the shared expert's precision
  const __nv_bfloat16* act = nullptr;          // moe_gate_up outputs
  const __nv_bfloat16* shared_act = nullptr;
  const float* shared_scale = nullptr;
  __nv_bfloat16* out = nullptr;                // [B][hidden] MoE block output
  const float* shared_down_block_scale = nullptr;  // FP8 shared expert: its block scales
};

// The rules and the measurements behind them: kernels/tiling/moe.h. P: the routed experts' precision,
// PS the shared expert's.
template <class D, int B, Precision P, Precision PS = Precision::kBF16>
struct MoeGateUpTraits {
  static constexpr tiling::MoeGateUpTiling kTiling = tiling::moe_gate_up_tiling(D::kDims, B, P, PS);
  static constexpr bool kNarrow = kTiling.narrow;
  static constexpr int kWarps = kTiling.warps;
  static constexpr int kThreads = kTiling.threads;
  static constexpr int kMinBlocks = kTiling.min_blocks;
  static constexpr int kSlots = kTiling.slots;
  static constexpr int kNTiles = kTiling.n_tiles;
  using Routed = ExpertTilePlan<P, D::kHidden, D::kInter, 2, kWarps, 1, kTiling.routed_loads>;
  static constexpr int kSharedSlices = kTiling.shared_slices;
  using Shared = ExpertTilePlan<PS, D::kHidden, D::kSharedInter, 2, kWarps, kSharedSlices>;
  static constexpr int kBlocks = int(kTiling.blocks);
  static constexpr int kSmemBytes = kTiling.smem_bytes;  // per-warp C fragments
  static constexpr int kPartialFloats = kTiling.partial_floats;
  static constexpr int kArrivals = kTiling.arrivals;
  static_assert(kBlocks == 1 + Shared::kBlocks + MoeRoute<D, B>::kMaxActive * Routed::kBlocks, "moe_gate_up: grid");
  static_assert(kSmemBytes <= kBooster.smem_per_block, "moe_gate_up: shared memory exceeds the booster's per-block limit");
};

template <class D, int B, Precision P, Precision PS = Precision::kBF16>
struct MoeDownTraits {
  static constexpr tiling::MoeDownTiling kTiling = tiling::moe_down_tiling(D::kDims, B, P, PS);
  static constexpr bool kPipelined = kTiling.pipelined;
  static constexpr bool kNarrow = kTiling.narrow;
  static constexpr int kWarps = kTiling.warps;
  static constexpr int kThreads = kTiling.threads;
  static constexpr int kSlots = kTiling.slots;
  static constexpr int kNTiles = kTiling.n_tiles;
  using Routed = ExpertTilePlan<P, D::kInter, D::kHidden, 1, 1, 1, kTiling.routed_loads>;
  using Shared = ExpertTilePlan<PS, D::kSharedInter, D::kHidden, 1, 1, 1>;
  static constexpr int kBlocks = kTiling.blocks;
  // A slot's 16 outputs, padded so the 32 lanes of a C-fragment store hit 32 distinct banks.
  static constexpr int kYStride = kTiling.y_stride;
  // Each warp takes at most one of the shared expert's units before the routed ones (moe_down_kernel).
  static_assert(Shared::kParts <= kWarps, "moe_down: more shared-expert K parts than warps");
  static constexpr int kSmemBytes = kTiling.smem_bytes;
  static_assert(kSmemBytes <= kBooster.smem_per_block, "moe_down: shared memory exceeds the booster's per-block limit");
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

namespace moe {

// One entry of moe_gate_up: an expert's gate/up matrices and where its rows come from and go.
struct GateUpEntry {
  const uint8_t* gate;
  const uint8_t* up;
  const uint8_t* gate_scale;  // nvfp4, fp8 block scales
  const uint8_t* up_scale;
  float gate_factor, up_factor;  // fp32 factors of the results (nvfp4: scale2 * 2^7; bf16: 1)
  const int* token_rows;         // token row of activation column n; nullptr: row n
  int rows;                      // activation columns: the expert's routed rows, or B
  __nv_bfloat16* act;            // activation column n goes to act row n
};

__device__ __forceinline__ float4 add4(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

// C fragment of lane (g, c) in tile `tile`, column group nt: (row g, col 2c), (g, 2c+1), (g+8, 2c),
// (g+8, 2c+1). Writes silu(gate) * up for the columns that are real rows.
template <int kInter>
__device__ __forceinline__ void store_act(const GateUpEntry& en, int tile, int nt, int lane, float4 g, float4 u) {
  const float gv[4] = {g.x, g.y, g.z, g.w}, uv[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int n = nt * 8 + 2 * (lane & 3) + (q & 1);
    const int i = tile * 16 + (lane >> 2) + 8 * (q >> 1);
    if (n < en.rows) en.act[size_t(n) * kInter + i] = __float2bfloat16_rn(silu(gv[q] * en.gate_factor) * (uv[q] * en.up_factor));
  }
}

// One block's share of an entry: tiles of group `group`, K slice `slice`. red: [kWarps][kNTiles][2][32].
template <Precision Q, int K, int kInter, class Plan, int kNTiles>
__device__ __forceinline__ void gate_up_block(const GateUpEntry& en, const __nv_bfloat16* x, int group, int slice,
                                              float4* red, float* partial, int* arrivals) {
  using W = WeightTileTraits<Q>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile = group * Plan::kTilesPerBlock + warp / Plan::kWarpsPerTile;
  const bool has_tile = tile < Plan::kTiles;
  const bool leader = has_tile && warp % Plan::kWarpsPerTile == 0;
  const int ntiles = (en.rows + 7) / 8;
  const size_t w_at = size_t(tile) * 16 * W::template kRowBytes<K>;
  const size_t s_at = W::template scale_at<K>(tile * 16);
  float4* my_red = red + warp * kNTiles * 2 * 32;
  if (has_tile) {
    TileStages<Q, Plan::kG> st[2];
    for (int nt = 0; nt < ntiles; ++nt) {
      const int n = min(nt * 8 + lane / 4, en.rows - 1);
      const __nv_bfloat16* xr = x + size_t(en.token_rows ? en.token_rows[n] : n) * K;
      float acc[2][4] = {};
#pragma unroll 1
      for (int r = 0; r < Plan::kRounds; ++r) {
        const int part = (slice * Plan::kRounds + r) * Plan::kWarpsPerTile + warp % Plan::kWarpsPerTile;
        const int k_begin = part * Plan::kPartK;
        // With one round the weights stay in registers across row groups; with several they are
        // re-read (from L2) per group, which only happens for experts with more than 8 rows.
        if (Plan::kRounds > 1 || nt == 0) {
          load_tile_stages<Q, K, Plan::kG>(st[0], en.gate + w_at, W::kScaled ? en.gate_scale + s_at : nullptr, k_begin, lane);
          load_tile_stages<Q, K, Plan::kG>(st[1], en.up + w_at, W::kScaled ? en.up_scale + s_at : nullptr, k_begin, lane);
        }
        mma_tile_stages<Q, K, Plan::kG, 2>(st, xr, k_begin, lane, acc);
      }
      my_red[(nt * 2 + 0) * 32 + lane] = make_float4(acc[0][0], acc[0][1], acc[0][2], acc[0][3]);
      my_red[(nt * 2 + 1) * 32 + lane] = make_float4(acc[1][0], acc[1][1], acc[1][2], acc[1][3]);
    }
  }
  __syncthreads();
  // The first warp of a tile sums its K parts in warp order.
  if (leader) {
    for (int nt = 0; nt < ntiles; ++nt) {
      float4 g = my_red[(nt * 2 + 0) * 32 + lane], u = my_red[(nt * 2 + 1) * 32 + lane];
      for (int w = 1; w < Plan::kWarpsPerTile; ++w) {
        g = add4(g, red[((warp + w) * kNTiles + nt) * 2 * 32 + lane]);
        u = add4(u, red[(((warp + w) * kNTiles + nt) * 2 + 1) * 32 + lane]);
      }
      if constexpr (Plan::kSlices == 1) {
        store_act<kInter>(en, tile, nt, lane, g, u);
      } else {
        float4* mine = reinterpret_cast<float4*>(partial) + (((size_t(tile) * Plan::kSlices + slice) * kNTiles + nt) * 2) * 32;
        mine[lane] = g;
        mine[32 + lane] = u;
      }
    }
  }
  if constexpr (Plan::kSlices > 1) {
    // Last block of the group to arrive sums the slices in slice order, then re-arms the counter.
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&arrivals[group], 1) == Plan::kSlices - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (leader) {
      for (int nt = 0; nt < ntiles; ++nt) {
        float4 g = make_float4(0, 0, 0, 0), u = g;
        for (int s = 0; s < Plan::kSlices; ++s) {
          const float4* src = reinterpret_cast<const float4*>(partial) + (((size_t(tile) * Plan::kSlices + s) * kNTiles + nt) * 2) * 32;
          g = add4(g, __ldcg(src + lane));
          u = add4(u, __ldcg(src + 32 + lane));
        }
        store_act<kInter>(en, tile, nt, lane, g, u);
      }
    }
    if (threadIdx.x == 0) arrivals[group] = 0;
  }
}

// Into L2, the shared-expert weights one block of moe_gate_up streams: the gate and up rows of its
// group's tiles, over its K slice (a contiguous 1/kSlices of every row: the slice's K parts are
// consecutive). They do not depend on the route, so this runs before the chain's wait.
template <class Plan, Precision PS, int K>
__device__ __forceinline__ void prefetch_shared_tiles(const uint8_t* gate, const uint8_t* up, int group, int slice) {
  constexpr int kRowBytes = WeightTileTraits<PS>::template kRowBytes<K>, kSliceBytes = kRowBytes / Plan::kSlices,
                kLines = (kSliceBytes + 127) / 128;
  const int tile0 = group * Plan::kTilesPerBlock;
  const int rows = min(Plan::kTilesPerBlock, Plan::kTiles - tile0) * 16;
  for (int i = threadIdx.x; i < 2 * rows * kLines; i += blockDim.x) {
    const int r = (i / kLines) % rows, line = i % kLines;
    const uint8_t* at = (i < rows * kLines ? gate : up) + size_t(tile0 * 16 + r) * kRowBytes + size_t(slice) * kSliceBytes +
                        min(line * 128, kSliceBytes - 1);
    prefetch_l2(at);
  }
}

// sigmoid(shared_expert_gate . x[b]) for every row: one warp per row (moe_shared_gate.cuh).
template <class D, int B, int kWarps>
__device__ __forceinline__ void shared_expert_scale(const MoeGateUpParams<D, B>& p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int b = warp; b < B; b += kWarps) {
    const float dot = shared_gate_dot<D::kHidden>(p.shared_expert_gate, p.x + size_t(b) * D::kHidden, lane);
    if (lane == 0) p.shared_scale[b] = shared_gate_scale(dot);
  }
}

// This warp's 16 output columns of moe_down for `rows` activation rows (act row n is y row n), over
// the loaded stages from column k_begin, times factor, into y[row][kYStride].
template <Precision Q, int K, int kG, int kYStride>
__device__ __forceinline__ void down_rows(const TileStages<Q, kG> (&st)[1], const __nv_bfloat16* act, int rows, int k_begin,
                                          float factor, float* y, int lane) {
  for (int nt = 0; nt < (rows + 7) / 8; ++nt) {
    const int n = min(nt * 8 + lane / 4, rows - 1);
    float acc[1][4] = {};
    // NOTE: the weights pass through an empty asm per row group, so that the decode is redone per
    // group rather than hoisted out of the loop: the decoded stages would need ~256 registers.
    TileStages<Q, kG> fresh[1] = {st[0]};
    opaque(fresh[0]);
    mma_tile_stages<Q, K, kG, 1>(fresh, act + size_t(n) * K, k_begin, lane, acc);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int col = nt * 8 + 2 * (lane & 3) + (q & 1);
      if (col < rows) y[col * kYStride + (lane >> 2) + 8 * (q >> 1)] = acc[0][q] * factor;
    }
  }
}

// One K part of the shared expert's down projection (precision PS; w and, for FP8, scale at this
// warp's first output row): this warp's 16 output columns for all B rows, into y[row][kYStride].
template <Precision PS, int K, class Plan, int kYStride>
__device__ __forceinline__ void down_shared(const uint8_t* w, const uint8_t* scale, const __nv_bfloat16* act, int rows, int part,
                                            float* y, int lane) {
  TileStages<PS, Plan::kG> st[1];
  const int k_begin = part * Plan::kPartK;
  load_tile_stages<PS, K, Plan::kG>(st[0], w, scale, k_begin, lane);
  down_rows<PS, K, Plan::kG, kYStride>(st, act, rows, k_begin, 1.0f, y, lane);
}

// A routed unit of moe_down in flight: its weights in registers and where its rows come from and go.
template <Precision Q, int kG>
struct DownUnit {
  TileStages<Q, kG> st[1];
  float factor;  // nvfp4: scale2 * 2^7; bf16: 1
  int start;     // the entry's first slot
  int rows;      // the entry's routed rows
  int part;      // K part
};

// Issues routed unit r's loads (entry r / kParts, part r % kParts) for output rows j0 .. j0 + 15.
template <class D, int B, Precision P, class Plan>
__device__ __forceinline__ void down_load(const MoeDownParams<D, B>& p, int r, int j0, int lane, DownUnit<P, Plan::kG>& u) {
  using W = WeightTileTraits<P>;
  const int a = r / Plan::kParts;
  u.part = r % Plan::kParts;
  u.start = p.route->start[a];
  u.rows = p.route->start[a + 1] - u.start;
  const uint8_t* unit = p.experts + uint64_t(p.route->expert[a]) * p.expert_stride;
  u.factor = 1.0f;
  if constexpr (P == Precision::kNVFP4) u.factor = *reinterpret_cast<const float*>(unit + p.expert.down.scale2) * kNvfp4Unbias;
  load_tile_stages<P, D::kInter, Plan::kG>(u.st[0], unit + p.expert.down.weight + size_t(j0) * W::template kRowBytes<D::kInter>,
                                           unit + p.expert.down.scale + W::template scale_at<D::kInter>(j0),
                                           u.part * Plan::kPartK, lane);
}

// The loaded unit's 16 output columns for every row of its entry, times its factor, into
// ys[part][slot][kYStride].
template <class D, int B, Precision P, class Plan, int kSlots, int kYStride>
__device__ __forceinline__ void down_mma(const __nv_bfloat16* act, const DownUnit<P, Plan::kG>& u, float* ys, int lane) {
  down_rows<P, D::kInter, Plan::kG, kYStride>(u.st, act + size_t(u.start) * D::kInter, u.rows, u.part * Plan::kPartK, u.factor,
                                              ys + (u.part * kSlots + u.start) * kYStride, lane);
}

}  // namespace moe

template <class D, int B, Precision P, Precision PS>
__global__ void __launch_bounds__(MoeGateUpTraits<D, B, P, PS>::kThreads, MoeGateUpTraits<D, B, P, PS>::kMinBlocks)
    moe_gate_up_kernel(const __grid_constant__ MoeGateUpParams<D, B> p) {
  using T = MoeGateUpTraits<D, B, P, PS>;
  extern __shared__ float4 red[];
  int local = blockIdx.x - 1;
  if (local >= 0 && local < T::Shared::kBlocks)
    moe::prefetch_shared_tiles<typename T::Shared, PS, D::kHidden>(reinterpret_cast<const uint8_t*>(p.shared_gate),
                                                                    reinterpret_cast<const uint8_t*>(p.shared_up),
                                                                    local / T::kSharedSlices, local % T::kSharedSlices);
  // After moe_dispatch has completed; moe_down may launch once every block is past this: it reads
  // nothing of ours before its own wait.
  enter_chain();
  if (blockIdx.x == 0) {
    moe::shared_expert_scale<D, B, T::kWarps>(p);
    return;
  }
  if (local < T::Shared::kBlocks) {
    const moe::GateUpEntry en{reinterpret_cast<const uint8_t*>(p.shared_gate), reinterpret_cast<const uint8_t*>(p.shared_up),
                              reinterpret_cast<const uint8_t*>(p.shared_gate_block_scale),
                              reinterpret_cast<const uint8_t*>(p.shared_up_block_scale), 1.0f, 1.0f, nullptr, B, p.shared_act};
    moe::gate_up_block<PS, D::kHidden, D::kSharedInter, typename T::Shared, T::kNTiles>(
        en, p.x, local / T::kSharedSlices, local % T::kSharedSlices, red, p.partial, p.arrivals);
    return;
  }
  local -= T::Shared::kBlocks;
  const int a = local / T::Routed::kBlocks;
  // The entry in one round trip to L2 (a < kMaxActive by the grid, so every read is in bounds whether
  // or not the entry is active): its weight loads then wait for one route read, not two.
  const int active = p.route->active, start = p.route->start[a], end = p.route->start[a + 1], expert = p.route->expert[a];
  if (a >= active) return;
  const uint8_t* unit = p.experts + uint64_t(expert) * p.expert_stride;
  float gate_factor = 1.0f, up_factor = 1.0f;
  if constexpr (P == Precision::kNVFP4) {
    gate_factor = *reinterpret_cast<const float*>(unit + p.expert.gate.scale2) * kNvfp4Unbias;
    up_factor = *reinterpret_cast<const float*>(unit + p.expert.up.scale2) * kNvfp4Unbias;
  }
  const moe::GateUpEntry en{unit + p.expert.gate.weight, unit + p.expert.up.weight, unit + p.expert.gate.scale,
                            unit + p.expert.up.scale, gate_factor, up_factor, p.route->slot_row + start, end - start,
                            p.act + size_t(start) * D::kInter};
  moe::gate_up_block<P, D::kHidden, D::kInter, typename T::Routed, T::kNTiles>(en, p.x, local % T::Routed::kBlocks, 0, red,
                                                                            p.partial, p.arrivals);
}

template <class D, int B, Precision P, Precision PS>
__global__ void __launch_bounds__(MoeDownTraits<D, B, P, PS>::kThreads, 1)
    moe_down_kernel(const __grid_constant__ MoeDownParams<D, B> p) {
  using T = MoeDownTraits<D, B, P, PS>;
  using R = typename T::Routed;
  using S = typename T::Shared;
  extern __shared__ float ys[];  // routed [R::kParts][kSlots][kYStride], then shared [S::kParts][B][kYStride]
  float* ys_shared = ys + R::kParts * T::kSlots * T::kYStride;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j0 = blockIdx.x * 16;
  // Before gate_up completes, into L2 where the units below read them: this block's 16 rows of the
  // shared down projection and of the first active experts' down projection (weights, nvfp4 block
  // scales and scale2; each a contiguous range). Weights only, and the route: moe_dispatch completed
  // before the last gate_up block passed its wait, so before this kernel launched (see the note at
  // the top); __ldcg reads it from L2, the point of coherence.
  {
    using WT = WeightTileTraits<P>;
    constexpr int kSharedRowBytes = WeightTileTraits<PS>::template kRowBytes<D::kSharedInter>, kSharedBytes = 16 * kSharedRowBytes;
    constexpr int kWeightBytes = 16 * WT::template kRowBytes<D::kInter>;
    constexpr int kScaleBytes = WT::kNvfp4 ? 16 * WT::template kScaleRowBytes<D::kInter> : 0;
    constexpr int kSharedLines = (kSharedBytes + 127) / 128;
    constexpr int kWeightLines = (kWeightBytes + 127) / 128;
    constexpr int kScaleLines = (kScaleBytes + 127) / 128;
    constexpr int kUnitLines = kWeightLines + kScaleLines + (WT::kNvfp4 ? 1 : 0);
    // NOTE: only the experts the warps take in their first pass over the units: at large buckets all
    // active experts' rows would be far more than L2 holds until they are read.
    constexpr int kFirstPass = (T::kWarps - S::kParts + R::kParts - 1) / R::kParts;
    constexpr int kMaxActive = MoeRoute<D, B>::kMaxActive;
    constexpr int kPrefetchExperts = kFirstPass < 0 ? 0 : kFirstPass < kMaxActive ? kFirstPass : kMaxActive;
    const int experts = min(max(__ldcg(&p.route->active), 0), kPrefetchExperts);
    for (int i = threadIdx.x; i < kSharedLines + experts * kUnitLines; i += T::kThreads) {
      const uint8_t* at;
      if (i < kSharedLines) {
        at = reinterpret_cast<const uint8_t*>(p.shared_down) + size_t(j0) * kSharedRowBytes + min(i * 128, kSharedBytes - 1);
      } else {
        const int a = (i - kSharedLines) / kUnitLines, line = (i - kSharedLines) % kUnitLines;
        const int e = __ldcg(&p.route->expert[a]);
        if (e < 0 || e >= D::kExperts) continue;
        const uint8_t* unit = p.experts + uint64_t(e) * p.expert_stride;
        if (line < kWeightLines)
          at = unit + p.expert.down.weight + size_t(j0) * WT::template kRowBytes<D::kInter> + min(line * 128, kWeightBytes - 1);
        else if (line < kWeightLines + kScaleLines)
          at = unit + p.expert.down.scale + size_t(j0) * WT::template kScaleRowBytes<D::kInter> +
               min((line - kWeightLines) * 128, kScaleBytes - 1);
        else
          at = unit + p.expert.down.scale2;
      }
      prefetch_l2(at);
    }
  }
  wait_prerequisites();
  release_dependents();
  // Units: the shared expert's S::kParts, then every active entry's R::kParts, dealt round robin.
  int u = warp;
  if (u < S::kParts) {
    using SW = WeightTileTraits<PS>;
    moe::down_shared<PS, D::kSharedInter, S, T::kYStride>(
        reinterpret_cast<const uint8_t*>(p.shared_down) + size_t(j0) * SW::template kRowBytes<D::kSharedInter>,
        SW::kFp8 ? reinterpret_cast<const uint8_t*>(p.shared_down_block_scale) + SW::template scale_at<D::kSharedInter>(j0) : nullptr,
        p.shared_act, B, u, ys_shared + u * B * T::kYStride, lane);
    u += T::kWarps;
  }
  const int routed = p.route->active * R::kParts;
  int r = u - S::kParts;
  if constexpr (T::kPipelined) {
    // Two routed units in flight: the next one's loads are issued before this one's math.
    moe::DownUnit<P, R::kG> ua, ub;
    if (r < routed) moe::down_load<D, B, P, R>(p, r, j0, lane, ua);
    while (r < routed) {
      if (r + T::kWarps < routed) moe::down_load<D, B, P, R>(p, r + T::kWarps, j0, lane, ub);
      moe::down_mma<D, B, P, R, T::kSlots, T::kYStride>(p.act, ua, ys, lane);
      r += T::kWarps;
      if (r >= routed) break;
      if (r + T::kWarps < routed) moe::down_load<D, B, P, R>(p, r + T::kWarps, j0, lane, ua);
      moe::down_mma<D, B, P, R, T::kSlots, T::kYStride>(p.act, ub, ys, lane);
      r += T::kWarps;
    }
  } else {
    for (; r < routed; r += T::kWarps) {
      moe::DownUnit<P, R::kG> ua;
      moe::down_load<D, B, P, R>(p, r, j0, lane, ua);
      moe::down_mma<D, B, P, R, T::kSlots, T::kYStride>(p.act, ua, ys, lane);
    }
  }
  __syncthreads();
  for (int o = threadIdx.x; o < B * 16; o += T::kThreads) {
    const int b = o / 16, r = o % 16;
    float shared = 0.0f;
#pragma unroll
    for (int part = 0; part < S::kParts; ++part) shared += ys_shared[(part * B + b) * T::kYStride + r];
    float y = p.shared_scale[b] * shared;
#pragma unroll
    for (int t = 0; t < D::kTopK; ++t) {
      const int slot = p.route->slot_of[b * D::kTopK + t];
      float v = 0.0f;
#pragma unroll
      for (int part = 0; part < R::kParts; ++part) v += ys[(part * T::kSlots + slot) * T::kYStride + r];
      y += p.route_weight[b * D::kTopK + t] * v;
    }
    p.out[size_t(b) * D::kHidden + j0 + r] = __float2bfloat16_rn(y);
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// REQUIRES: device pointers; moe_dispatch for this step already on `stream`; arrivals zeroed once at
// allocation. The first call per instantiation sets the kernel's shared-memory limit, so make it before
// any graph capture (as every launcher of this directory does).
template <class D, int B, Precision P, Precision PS = Precision::kBF16>
void moe_gate_up(const MoeGateUpParams<D, B>& p, cudaStream_t stream) {
  using T = MoeGateUpTraits<D, B, P, PS>;
  CHECK(PS != Precision::kFP8Block || (p.shared_gate_block_scale && p.shared_up_block_scale), "moe_gate_up: FP8 shared expert without its scales");
  raise_smem_limit_once<moe_gate_up_kernel<D, B, P, PS>>(T::kSmemBytes);
  launch_dependent(moe_gate_up_kernel<D, B, P, PS>, T::kBlocks, T::kThreads, T::kSmemBytes, stream, p);
}

// REQUIRES: moe_gate_up for this step already on `stream`, the kernel just before this launch, and
// moe_dispatch the one before it: down reads the route and prefetches weights before its wait, and
// every other input after it (gate_up complete).
template <class D, int B, Precision P, Precision PS = Precision::kBF16>
void moe_down(const MoeDownParams<D, B>& p, cudaStream_t stream) {
  using T = MoeDownTraits<D, B, P, PS>;
  CHECK(PS != Precision::kFP8Block || p.shared_down_block_scale, "moe_down: FP8 shared expert without its scales");
  raise_smem_limit_once<moe_down_kernel<D, B, P, PS>>(T::kSmemBytes);
  launch_dependent(moe_down_kernel<D, B, P, PS>, T::kBlocks, T::kThreads, T::kSmemBytes, stream, p);
}

}  // namespace rocket::cuda
