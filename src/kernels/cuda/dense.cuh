// Dense projection on the H200: y[b][n] = sum_k W[n][k] x[b][k] for the `rows` token rows of one
// bucket, every projection of the residual stream but the experts' (attention q/k/v/o, GDN in/out
// projections, router, LM head; the shared expert runs in moe_experts.cuh). W is row-major [N][K] (HF
// layout) in precision P: bf16, or block FP8 (e4m3 with one fp32 scale per 128 x 128 block, as `-FP8`
// releases store it) dequantised in registers; x bf16 [rows][K], y [rows][N] in bf16 or fp32 (router
// and LM-head logits); fp32 accumulation on the tensor cores (weight_tile.cuh).
//
// Decode is weight-streaming bound, so the kernel is shaped around keeping HBM busy: a warp owns one
// 16-row weight tile over one K part (kG stages, up to 8 16-byte loads per lane issued before any math,
// up to 4 KiB per warp) and reuses those registers for every group of 8 token rows. The K parts of a tile
// are spread over the warps of one block, which sums them through shared memory in warp order; a
// block holds kTilesPerBlock tiles. There is no split across blocks, so no workspace: every shape the
// engine has either fills the H200 with tiles or is small enough to be latency bound (see DenseTraits).
//
// dense_group runs several projections of the same x in one launch (their tiles numbered one segment
// after another, each with its own weights and output), so a projection of a few tiles (GDN in_proj
// b, a; attention k, v) rides in the waves of the big ones instead of paying a launch latency of its
// own. A single projection is the group of one: both kernels share one body.
//
// Two forms, chosen at compile time from the shape (DenseStreamTraits::kChosen; bf16 weights only):
//   registers  the form above: every block loads its tiles' weights into registers, computes, leaves.
//   stream     one persistent block per SM: a producer warp copies 16-row weight chunks (16 rows x
//              kChunkK columns, one bulk copy per row) into a ring of shared-memory stages and refills
//              a stage as soon as the consumer warps release it, so every SM keeps the ring's HBM reads
//              (~100 KiB) in flight through the whole launch with no register cost and no gap between
//              one tile and the next. x is copied once into shared memory after the chain's wait; the
//              consumers split each chunk's columns, accumulate a tile over its chunks and sum their
//              partials in warp order at the tile's end.
// NOTE: the stream form is faster alone wherever x fits beside three stages (dense_check forms, B=16:
// in_proj qkv|z|b|a 17.50 -> 15.35 us, q|k|v 14.41 -> 11.88 us, LM head 272.7 -> 250.4 us; B=1 13.57 ->
// 12.72, 10.61 -> 9.97, 280.3 -> 228.0 us), but in the engine's chain it made the step slower (bucket
// 16 5.26 -> 5.53 ms: dense +0.03 ms, gaps +0.23 ms; also with tiles claimed dynamically instead of
// statically), and beside one other kernel it loses ~2 us per launch (dense_check pairs: in_proj then
// o_proj, B=1 17.7 -> 19.2-19.7 us). The likely cause, not measured apart: its ~200 KiB of shared
// memory keeps the neighbouring kernels' blocks off the SM, so their early loads no longer overlap it
// (a shared-memory carveout fixed for both kernels did not change the pairs). Only the LM head,
// one launch 10^2 times longer than that loss, takes it (kChosen), up to 16 rows (h200-a3b.md History:
// bucket 16 5.273 -> 5.236 ms), and only with whole 1024-column chunks: 33 KiB stages (a 128-column
// stage keeps 30 KiB in flight per SM: tiny LM head 151936x128 10.7 -> 39 us).
//
// Deterministic (every sum has a fixed order: mma steps in K order within a warp, rounds in order,
// then warps in order), graph-capturable (grid depends only on the template, no allocation, no
// synchronisation with the host).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "kernels/cuda/primitives/bulk_copy.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"
#include "kernels/cuda/primitives/smem_limit.cuh"
#include "kernels/cuda/primitives/weight_tile.cuh"
#include "kernels/cuda/booster.cuh"
#include "kernels/tiling/dense.h"

namespace rocket::cuda {

// A weight matrix's pointer: bf16 elements, or the e4m3 bytes of a block-FP8 one.
template <Precision P>
using DenseWeight = std::conditional_t<P == Precision::kBF16, const __nv_bfloat16*, const uint8_t*>;

template <int N, int K, int B, typename Out, Precision P = Precision::kBF16>
struct DenseParams {
  DenseWeight<P> w = nullptr;        // [N][K], readable for DenseTraits::kWeightReadBytes
  const __nv_bfloat16* x = nullptr;  // [rows][K]
  Out* y = nullptr;                  // [rows][N]
  int rows = 0;                      // 1 <= rows <= B; rows past it are not written
  // Rows of x the kernel may read (0: rows). NOTE: with fewer than 8 live rows, letting each of a
  // group's 8 mma columns read its own row of x (results discarded) measured faster for the LM head
  // at bucket 1 (h200-kernels.md: one live row 74% DRAM throughput, eight 90%; cause not known).
  int x_rows = 0;
  const float* scale = nullptr;  // FP8: [ceil(N / 128)][ceil(K / 128)] block scales
};

// Every launch choice, from the shape's tiling (kernels/tiling/dense.h), which the plan records.
template <int N, int K, int B, Precision P = Precision::kBF16>
struct DenseTraits {
  using W = WeightTileTraits<P>;
  static constexpr tiling::DenseTiling kTiling = tiling::dense_registers(N, K, B, kBooster, P);
  static constexpr int kStages = kTiling.stages;
  static constexpr int kG = kTiling.g;
  static constexpr int kParts = kTiling.parts;
  static constexpr int kTiles = kTiling.tiles;
  static constexpr int kWarpsPerTile = kTiling.warps_per_tile;
  static constexpr int kRounds = kTiling.rounds;
  static constexpr int kTilesPerBlock = kTiling.tiles_per_block;
  static constexpr int kWarps = kTiling.warps;
  static constexpr int kThreads = kTiling.threads;
  static constexpr int kBlocks = kTiling.blocks;
  static constexpr int kMinBlocks = kTiling.min_blocks;
  static constexpr int kRowGroups = kTiling.row_groups;
  static constexpr int kSmemBytes = kTiling.smem_bytes;
  static constexpr uint64_t kWeightReadBytes = kTiling.weight_read_bytes;

  static_assert(N >= 1 && K >= 1 && B >= 1 && B <= tiling::kDenseMaxRows, "dense: bad shape or bucket");
  static_assert(K % W::kLoadK == 0, "dense: K must be a whole number of 16-byte lane loads (multiple of 8)");
  static_assert(kStages % kG == 0 && kParts % kWarpsPerTile == 0, "dense: K does not split evenly over warps");
  static_assert(kThreads <= 1024, "dense: block too large");
  static_assert(kSmemBytes <= kBooster.smem_per_block, "dense: shared memory exceeds the booster's per-block limit");
};

// Grouped form: several projections of the same activations x in one launch, segment s with its own
// weight w[s] [Ns_s][K] and output y[s] [rows][Ns_s] (GDN in_proj qkv|z|b|a, attention q|k|v). Tiles
// are numbered segment after segment and the launch geometry is that of one matrix with all of them,
// so a small segment rides in the same wave as the big ones instead of paying a launch of its own.
template <Precision P, int K, int B, typename Out, int... Ns>
struct DenseGroupParams {
  static constexpr int kSegments = sizeof...(Ns);
  DenseWeight<P> w[kSegments] = {};        // segment s readable for DenseGroupTraits::kSegmentReadBytes<s>
  const __nv_bfloat16* x = nullptr;        // [rows][K]
  Out* y[kSegments] = {};                  // segment s: [rows][Ns_s]
  int rows = 0;                            // 1 <= rows <= B
  const float* scale[kSegments] = {};      // FP8: segment s's block scales
};

template <Precision P, int K, int B, int... Ns>
struct DenseGroupTraits : DenseTraits<16 * (0 + ... + ((Ns + 15) / 16)), K, B, P> {
  static constexpr int kSegments = sizeof...(Ns);
  static constexpr bool kWholeTiles = ((Ns % 16 == 0) && ...);  // no segment has a partial last tile

 private:
  static constexpr int n_of(int s) {
    constexpr int n[] = {Ns...};
    return n[s];
  }
  static constexpr int tile_begin(int s) {
    int t = 0;
    for (int i = 0; i < s; ++i) t += (n_of(i) + 15) / 16;
    return t;
  }

 public:
  template <int S>
  static constexpr int kN = n_of(S);
  template <int S>
  static constexpr int kTileBegin = tile_begin(S);  // first tile of segment S in the launch's numbering
  template <int S>
  static constexpr uint64_t kSegmentReadBytes = uint64_t((n_of(S) + 15) / 16) * 16 * tiling::row_bytes(P, K);

  static_assert(kSegments >= 1 && ((Ns >= 1) && ...), "dense group: empty segment");
};

// The stream form's geometry, and whether the shape takes it (kernels/tiling/dense.h).
template <int K, int B, int... Ns>
struct DenseStreamTraits {
  static constexpr tiling::DenseStreamTiling kTiling = tiling::dense_stream(K, B, (0 + ... + ((Ns + 15) / 16)), kBooster);
  static constexpr int kTiles = kTiling.tiles;
  static constexpr int kChunkK = kTiling.chunk_k;
  static constexpr int kChunks = kTiling.chunks;
  static constexpr int kRowBytes = kTiling.row_bytes;
  static constexpr int kRowStride = kTiling.row_stride;
  static constexpr int kStageBytes = kTiling.stage_bytes;
  static constexpr int kSteps = kTiling.steps;
  static constexpr int kConsumers = kTiling.consumers;
  static constexpr int kThreads = kTiling.threads;
  static constexpr int kRowGroups = kTiling.row_groups;
  static constexpr int kXStride = kTiling.x_stride;
  static constexpr int kRedBytes = kTiling.red_bytes;
  static constexpr int kXBytes = kTiling.x_bytes;
  static constexpr bool kFits = kTiling.fits;
  static constexpr bool kChosen = kTiling.chosen;
  static constexpr int kRing = kTiling.ring;
  static constexpr int kSmemBytes = kTiling.smem_bytes;
  static constexpr int kBlocks = kTiling.blocks;
  static_assert(K % 32 == 0 && K % kChunkK == 0, "dense stream: K must be whole 32-column steps and chunks");
  static_assert(!kFits || kSmemBytes <= kBooster.smem_per_block, "dense stream: shared memory exceeds the booster's per-block limit");
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

namespace dense_detail {

template <typename Out>
__device__ __forceinline__ Out to_out(float v) {
  if constexpr (std::is_same_v<Out, float>) {
    return v;
  } else {
    static_assert(std::is_same_v<Out, __nv_bfloat16>, "dense: output is bf16 or float");
    return __float2bfloat16_rn(v);
  }
}

// C fragment of lane (g, c) for tile `tile` of an output [rows][n_cols], token group rg: (weight row g,
// token 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1). Writes the entries that are real outputs.
template <bool kWholeTiles, typename Out>
__device__ __forceinline__ void store_fragment(Out* y, int n_cols, int rows, int tile, int rg, int lane, float4 v) {
  const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int n = tile * 16 + (lane >> 2) + 8 * (q >> 1);
    const int b = rg * 8 + 2 * (lane & 3) + (q & 1);
    if (b < rows && (kWholeTiles || n < n_cols)) y[size_t(b) * n_cols + n] = to_out<Out>(f[q]);
  }
}

// Where tile `tile` of a group launch lives: the last segment that begins at or before it, and the
// tile's number inside that segment. w_seg and y_seg are the kernel parameter's arrays, indexed only
// with constants (a single projection, the group of one, folds to constants).
template <Precision P, typename Out>
struct SegmentTile {
  DenseWeight<P> w;    // the segment's weights
  Out* y;              // the segment's output
  int n_cols;          // the segment's N
  int tile;            // the tile inside the segment
  const float* scale;  // FP8: the segment's block scales
};

template <Precision P, int K, int B, typename Out, int... Ns>
__device__ __forceinline__ SegmentTile<P, Out> segment_tile(const DenseWeight<P> (&w_seg)[sizeof...(Ns)],
                                                            Out* const (&y_seg)[sizeof...(Ns)],
                                                            const float* const (&s_seg)[sizeof...(Ns)], int tile) {
  using T = DenseGroupTraits<P, K, B, Ns...>;
  SegmentTile<P, Out> at{w_seg[0], y_seg[0], T::template kN<0>, tile, s_seg[0]};
  [&]<int... S>(std::integer_sequence<int, S...>) {
    ((tile >= T::template kTileBegin<S>
          ? (at = {w_seg[S], y_seg[S], T::template kN<S>, tile - T::template kTileBegin<S>, s_seg[S]}, 0)
          : 0),
     ...);
  }(std::make_integer_sequence<int, int(sizeof...(Ns))>{});
  return at;
}

// The whole kernel for a group of segments (a single projection is a group of one: every segment
// lookup below then folds to constants). w_seg and y_seg are the kernel parameter's arrays, indexed
// only with constants.
template <Precision P, int K, int B, typename Out, int... Ns>
__device__ __forceinline__ void dense_tiles(const DenseWeight<P> (&w_seg)[sizeof...(Ns)], Out* const (&y_seg)[sizeof...(Ns)],
                                            const float* const (&s_seg)[sizeof...(Ns)], const __nv_bfloat16* x, int rows,
                                            int x_rows) {
  using T = DenseGroupTraits<P, K, B, Ns...>;
  using W = typename T::W;
  extern __shared__ float4 red[];  // [kWarps][kRowGroups][32]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int local_tile = warp / T::kWarpsPerTile, part0 = warp % T::kWarpsPerTile;
  const int tile = blockIdx.x * T::kTilesPerBlock + local_tile;
  const bool has_tile = tile < T::kTiles;  // only the last block can hold fewer tiles
  const int row_groups = (rows + 7) / 8;

  const SegmentTile<P, Out> seg = segment_tile<P, K, B, Out, Ns...>(w_seg, y_seg, s_seg, tile);
  Out* const y = seg.y;
  const int n_cols = seg.n_cols, seg_tile = seg.tile;
  const uint8_t* w = reinterpret_cast<const uint8_t*>(seg.w) + size_t(seg_tile) * 16 * W::template kRowBytes<K>;
  const uint8_t* scale = W::kFp8 ? reinterpret_cast<const uint8_t*>(seg.scale) + W::template scale_at<K>(seg_tile * 16) : nullptr;

  // The first round's weights go into registers while the kernel before this one finishes (weights
  // are never written during a step): the chain's wait then costs no weight bandwidth.
  const auto round_k = [&](int r) { return (r * T::kWarpsPerTile + part0) * T::kG * W::kStageK; };
  TileStages<P, T::kG> st[1];
  if (has_tile) load_tile_stages<P, K, T::kG>(st[0], w, scale, round_k(0), lane);
  enter_chain();

  float acc[T::kRowGroups][1][4] = {};
  if (has_tile) {
#pragma unroll 1
    for (int r = 0; r < T::kRounds; ++r) {
      const int k_begin = round_k(r);
      if (r > 0) load_tile_stages<P, K, T::kG>(st[0], w, scale, k_begin, lane);
      // The same weight registers serve every group of 8 token rows; a lane's B column is token
      // rg * 8 + g, clamped so rows past `x_rows` are never read (products past `rows` are discarded).
#pragma unroll
      for (int rg = 0; rg < T::kRowGroups; ++rg) {
        if (rg < row_groups) {
          const int b = min(rg * 8 + (lane >> 2), x_rows - 1);
          mma_tile_stages<P, K, T::kG, 1>(st, x + size_t(b) * K, k_begin, lane, acc[rg]);
        }
      }
    }
  }

  if constexpr (T::kWarpsPerTile == 1) {
    if (has_tile) {
#pragma unroll
      for (int rg = 0; rg < T::kRowGroups; ++rg)
        if (rg < row_groups)
          store_fragment<T::kWholeTiles>(y, n_cols, rows, seg_tile, rg, lane,
                                         make_float4(acc[rg][0][0], acc[rg][0][1], acc[rg][0][2], acc[rg][0][3]));
    }
  } else {
    if (has_tile) {
#pragma unroll
      for (int rg = 0; rg < T::kRowGroups; ++rg)
        if (rg < row_groups)
          red[(warp * T::kRowGroups + rg) * 32 + lane] = make_float4(acc[rg][0][0], acc[rg][0][1], acc[rg][0][2], acc[rg][0][3]);
    }
    __syncthreads();
    // Warp part0 of a tile sums row groups part0, part0 + kWarpsPerTile, ... over the tile's warps in
    // warp order (the same order whichever warp does it).
    if (has_tile) {
      const int first = local_tile * T::kWarpsPerTile;
      for (int rg = part0; rg < row_groups; rg += T::kWarpsPerTile) {
        float4 s = red[(first * T::kRowGroups + rg) * 32 + lane];
#pragma unroll 8
        for (int i = 1; i < T::kWarpsPerTile; ++i) {
          const float4 v = red[((first + i) * T::kRowGroups + rg) * 32 + lane];
          s = make_float4(s.x + v.x, s.y + v.y, s.z + v.z, s.w + v.w);
        }
        store_fragment<T::kWholeTiles>(y, n_cols, rows, seg_tile, rg, lane, s);
      }
    }
  }
}

template <int K, int B, typename Out, int... Ns>
__device__ __forceinline__ void stream_tiles(const DenseGroupParams<Precision::kBF16, K, B, Out, Ns...>& p, int x_rows) {
  using T = DenseStreamTraits<K, B, Ns...>;
  using G = DenseGroupTraits<Precision::kBF16, K, B, Ns...>;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* ring = smem;
  uint8_t* xs = smem + T::kRing * T::kStageBytes;
  float4* red = reinterpret_cast<float4*>(xs + T::kXBytes);  // [2][kConsumers][kRowGroups][32]
  uint64_t* full = reinterpret_cast<uint64_t*>(reinterpret_cast<uint8_t*>(red) + T::kRedBytes);
  uint64_t* empty = full + T::kRing;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int my_tiles = (T::kTiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);
  const int my_chunks = my_tiles * T::kChunks;

  if (threadIdx.x == 0) {
    for (int s = 0; s < T::kRing; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], T::kConsumers);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  if (warp == T::kConsumers) {
    // Producer. Chunk i of this block: tile blockIdx.x + (i / kChunks) * gridDim.x, chunk i % kChunks.
    const auto issue = [&](int i) {
      const int s = i % T::kRing;
      const SegmentTile<Precision::kBF16, Out> seg =
          segment_tile<Precision::kBF16, K, B, Out, Ns...>(p.w, p.y, p.scale, int(blockIdx.x) + (i / T::kChunks) * int(gridDim.x));
      const uint8_t* src = reinterpret_cast<const uint8_t*>(seg.w) + (size_t(seg.tile) * 16 * K + (i % T::kChunks) * T::kChunkK) * 2;
      if (lane == 0) mbarrier_arrive_expect_tx(&full[s], 16 * T::kRowBytes);
      __syncwarp();
      if (lane < 16) bulk_copy_to_shared(ring + s * T::kStageBytes + lane * T::kRowStride, src + size_t(lane) * K * 2, T::kRowBytes, &full[s]);
    };
    // The first ring of weights is in flight while the kernel before this one finishes.
    const int pre = my_chunks < T::kRing ? my_chunks : T::kRing;
    for (int i = 0; i < pre; ++i) issue(i);
    enter_chain();
    for (int i = pre; i < my_chunks; ++i) {
      mbarrier_wait(&empty[i % T::kRing], ((i / T::kRing) - 1) & 1);
      issue(i);
    }
    return;
  }

  // Consumers.
  enter_chain();
  const int xr = x_rows > p.rows ? x_rows : p.rows;
  const int row_groups = (p.rows + 7) / 8;
  const int x_live = xr < B ? xr : B;  // rows of x in shared memory
  for (int v = threadIdx.x; v < x_live * (K / 8); v += T::kConsumers * 32) {
    const int b = v / (K / 8), k8 = v % (K / 8);
    *reinterpret_cast<uint4*>(xs + b * T::kXStride + k8 * 16) = __ldg(reinterpret_cast<const uint4*>(p.x + size_t(b) * K) + k8);
  }
  named_barrier(1, T::kConsumers * 32);
  const int g = lane >> 2, c = lane & 3;
  for (int j = 0; j < my_tiles; ++j) {
    float acc[T::kRowGroups][4] = {};
    for (int ch = 0; ch < T::kChunks; ++ch) {
      const int i = j * T::kChunks + ch, s = i % T::kRing;
      mbarrier_wait(&full[s], (i / T::kRing) & 1);
      const uint8_t* stage = ring + s * T::kStageBytes;
#pragma unroll 4
      for (int step = warp; step < T::kSteps; step += T::kConsumers) {
        const int kc = step * 32 + c * 8;          // column within the chunk
        const int k = ch * T::kChunkK + kc;        // column within K
        const uint4 a0 = *reinterpret_cast<const uint4*>(stage + g * T::kRowStride + kc * 2);
        const uint4 a1 = *reinterpret_cast<const uint4*>(stage + (g + 8) * T::kRowStride + kc * 2);
        const uint32_t lo[4] = {a0.x, a1.x, a0.y, a1.y}, hi[4] = {a0.z, a1.z, a0.w, a1.w};
#pragma unroll
        for (int rg = 0; rg < T::kRowGroups; ++rg) {
          if (rg < row_groups) {
            const uint4 xv = *reinterpret_cast<const uint4*>(xs + min(rg * 8 + g, x_live - 1) * T::kXStride + k * 2);
            mma_bf16_16816(acc[rg], lo, xv.x, xv.y);
            mma_bf16_16816(acc[rg], hi, xv.z, xv.w);
          }
        }
      }
      __syncwarp();
      if (lane == 0) mbarrier_arrive(&empty[s]);
    }
    // Partials of this tile into buffer j % 2; the barrier also orders the previous tile's reads of
    // the other buffer before the next tile writes it.
    float4* mine = red + (j & 1) * T::kConsumers * T::kRowGroups * 32;
#pragma unroll
    for (int rg = 0; rg < T::kRowGroups; ++rg)
      if (rg < row_groups) mine[(warp * T::kRowGroups + rg) * 32 + lane] = make_float4(acc[rg][0], acc[rg][1], acc[rg][2], acc[rg][3]);
    named_barrier(1, T::kConsumers * 32);
    const SegmentTile<Precision::kBF16, Out> seg =
        segment_tile<Precision::kBF16, K, B, Out, Ns...>(p.w, p.y, p.scale, int(blockIdx.x) + j * int(gridDim.x));
    for (int rg = warp; rg < row_groups; rg += T::kConsumers) {
      float4 sum = mine[rg * 32 + lane];
      for (int q = 1; q < T::kConsumers; ++q) {
        const float4 v = mine[(q * T::kRowGroups + rg) * 32 + lane];
        sum = make_float4(sum.x + v.x, sum.y + v.y, sum.z + v.z, sum.w + v.w);
      }
      store_fragment<G::kWholeTiles>(seg.y, seg.n_cols, p.rows, seg.tile, rg, lane, sum);
    }
  }
}

}  // namespace dense_detail

template <int N, int K, int B, typename Out, Precision P>
__global__ void __launch_bounds__(DenseTraits<N, K, B, P>::kThreads, DenseTraits<N, K, B, P>::kMinBlocks)
    dense_kernel(const __grid_constant__ DenseParams<N, K, B, Out, P> p) {
  const DenseWeight<P> w[1] = {p.w};
  Out* const y[1] = {p.y};
  const float* const scale[1] = {p.scale};
  dense_detail::dense_tiles<P, K, B, Out, N>(w, y, scale, p.x, p.rows, p.x_rows > p.rows ? p.x_rows : p.rows);
}

template <Precision P, int K, int B, typename Out, int... Ns>
__global__ void __launch_bounds__(DenseGroupTraits<P, K, B, Ns...>::kThreads, DenseGroupTraits<P, K, B, Ns...>::kMinBlocks)
    dense_group_kernel(const __grid_constant__ DenseGroupParams<P, K, B, Out, Ns...> p) {
  dense_detail::dense_tiles<P, K, B, Out, Ns...>(p.w, p.y, p.scale, p.x, p.rows, p.rows);
}

template <int K, int B, typename Out, int... Ns>
__global__ void __launch_bounds__(DenseStreamTraits<K, B, Ns...>::kThreads, 1)
    dense_stream_kernel(const __grid_constant__ DenseGroupParams<Precision::kBF16, K, B, Out, Ns...> p, int x_rows) {
  dense_detail::stream_tiles<K, B, Out, Ns...>(p, x_rows);
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

enum class DenseForm { kRegisters, kStream };

// The stream form runs bf16 weights only.
template <Precision P, int K, int B, int... Ns>
constexpr DenseForm kDenseForm =
    P == Precision::kBF16 && DenseStreamTraits<K, B, Ns...>::kChosen ? DenseForm::kStream : DenseForm::kRegisters;

// The launch dense / dense_group make for these shapes, as the plan records it.
template <Precision P, int K, int B, int... Ns>
constexpr tiling::KernelTiles kDenseTiles = kDenseForm<P, K, B, Ns...> == DenseForm::kStream
                                                ? DenseStreamTraits<K, B, Ns...>::kTiling.tiles_of()
                                                : DenseGroupTraits<P, K, B, Ns...>::kTiling.tiles_of();

// A group launch in form F (dense_group takes the shape's form; the check compares both). x_rows as
// DenseParams::x_rows (stream form only: the register group reads `rows` rows of x).
template <DenseForm F, Precision P, int K, int B, typename Out, int... Ns>
void dense_group_in(const DenseGroupParams<P, K, B, Out, Ns...>& p, int x_rows, cudaStream_t stream) {
  CHECK(p.rows >= 1 && p.rows <= B, "dense group: rows outside [1, B]");
  CHECK(x_rows >= 0, "dense: negative x_rows");
  if constexpr (F == DenseForm::kStream) {
    static_assert(P == Precision::kBF16, "dense stream: bf16 weights only");
    using T = DenseStreamTraits<K, B, Ns...>;
    static_assert(T::kFits, "dense stream: x and three ring stages do not fit in shared memory");
    raise_smem_limit_once<dense_stream_kernel<K, B, Out, Ns...>>(T::kSmemBytes);
    launch_dependent(dense_stream_kernel<K, B, Out, Ns...>, T::kBlocks, T::kThreads, T::kSmemBytes, stream, p, x_rows);
  } else {
    using T = DenseGroupTraits<P, K, B, Ns...>;
    raise_smem_limit_once<dense_group_kernel<P, K, B, Out, Ns...>>(T::kSmemBytes);
    launch_dependent(dense_group_kernel<P, K, B, Out, Ns...>, T::kBlocks, T::kThreads, T::kSmemBytes, stream, p);
  }
}

// REQUIRES: device pointers; w, x 16-byte aligned (FP8: scale covers the matrix's blocks); x readable for max(rows, x_rows) rows; w readable
// for DenseTraits::kWeightReadBytes (the plan's 64 KiB weight alignment covers a partial last tile
// whenever that fits in the weight's 64 KiB units, e.g. shared_expert_gate 1x2048: 64 KiB); y does not
// alias w or x. The first call per instantiation sets the kernel's shared-memory limit, so make it
// before any graph capture (as every launcher of this directory does).
template <int N, int K, int B, typename Out, Precision P = Precision::kBF16>
void dense(const DenseParams<N, K, B, Out, P>& p, cudaStream_t stream) {
  CHECK(P != Precision::kFP8Block || p.scale != nullptr, "dense: an FP8 weight without its block scales");
  if constexpr (kDenseForm<P, K, B, N> == DenseForm::kStream) {
    dense_group_in<DenseForm::kStream>(DenseGroupParams<P, K, B, Out, N>{.w = {p.w}, .x = p.x, .y = {p.y}, .rows = p.rows},
                                       p.x_rows, stream);
  } else {
    using T = DenseTraits<N, K, B, P>;
    CHECK(p.rows >= 1 && p.rows <= B, "dense: rows outside [1, B]");
    CHECK(p.x_rows >= 0, "dense: negative x_rows");
    raise_smem_limit_once<dense_kernel<N, K, B, Out, P>>(T::kSmemBytes);
    launch_dependent(dense_kernel<N, K, B, Out, P>, T::kBlocks, T::kThreads, T::kSmemBytes, stream, p);
  }
}

// REQUIRES: as dense, per segment: w[s] readable for DenseGroupTraits::kSegmentReadBytes<s>; no y[s]
// aliases another, w or x.
template <Precision P, int K, int B, typename Out, int... Ns>
void dense_group(const DenseGroupParams<P, K, B, Out, Ns...>& p, cudaStream_t stream) {
  if constexpr (P == Precision::kFP8Block)
    for (const float* s : p.scale) CHECK(s != nullptr, "dense group: an FP8 weight without its block scales");
  dense_group_in<kDenseForm<P, K, B, Ns...>, P>(p, 0, stream);
}

}  // namespace rocket::cuda
