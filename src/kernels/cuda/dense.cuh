// Dense projection on the H200: y[b][n] = sum_k W[n][k] x[b][k] for the `rows` token rows of one
// bucket, every bf16 dense weight of the engine (attention q/k/v/o, GDN in/out projections, shared
// expert, router, LM head). W is bf16 row-major [N][K] (HF layout), x bf16 [rows][K], y [rows][N] in
// bf16 or fp32 (router and LM-head logits); fp32 accumulation on the tensor cores (weight_tile.cuh).
//
// Decode is weight-streaming bound, so the kernel is shaped around keeping HBM busy: a warp owns one
// 16-row weight tile over one K part (kG stages, up to 8 16-byte loads per lane issued before any math,
// up to 4 KiB per warp) and reuses those registers for every group of 8 token rows. The K parts of a tile
// are spread over the warps of one block, which sums them through shared memory in warp order; a
// block holds kTilesPerBlock tiles. There is no split across blocks, so no workspace: every shape the
// engine has either fills the H200 with tiles or is small enough to be latency bound (see DenseTraits).
//
// Deterministic (every sum has a fixed order: mma steps in K order within a warp, rounds in order,
// then warps in order), graph-capturable (grid depends only on the template, no allocation, no
// synchronisation with the host).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/weight_tile.cuh"

namespace rocket::cuda {

template <int N, int K, int B, typename Out>
struct DenseParams {
  const __nv_bfloat16* w = nullptr;  // [N][K], readable for DenseTraits::kWeightReadBytes
  const __nv_bfloat16* x = nullptr;  // [rows][K]
  Out* y = nullptr;                  // [rows][N]
  int rows = 0;                      // 1 <= rows <= B; rows past it are neither read nor written
};

// Every launch choice, a compile-time function of the shape: the plan records these.
template <int N, int K, int B>
struct DenseTraits {
  using W = WeightTileTraits<Precision::kBF16>;
  static constexpr int kSMs = 132;  // H200
  static constexpr int kStages = W::template kStages<K>;
  // NOTE: up to 8 loads of 16 bytes per lane in flight (4 KiB per warp) as the MoE experts use; with
  // 32 warps resident per SM that is 128 KiB per SM, well past the ~35 KiB per SM that Little's law
  // asks of 4.3 TB/s at ~1 us loaded latency, at a 64-register budget. From 16 token rows on, the
  // accumulators of the extra row groups take that budget: half the stages (still 64 KiB per SM).
  static constexpr int kGMax = B <= 8 ? 4 : 2;
  static constexpr int kG = kStages < kGMax ? kStages : kGMax;
  static constexpr int kParts = kStages / kG;
  static constexpr int kTiles = (N + 15) / 16;
  // NOTE: a shape with at most one tile per SM gets up to 32 warps per tile so its whole matrix is in
  // flight in one wave (o_proj 2048x4096: 128 blocks x 32 warps x 4 KiB = 16 MiB); any other gets 16,
  // so two blocks share an SM: one wave up to 264 tiles (in_proj_z), and past that one block's
  // reduction tail overlaps the other's loads.
  static constexpr int kMaxWarpsPerTile = kTiles <= kSMs ? 32 : 16;
  static constexpr int kWarpsPerTile = kParts < kMaxWarpsPerTile ? kParts : kMaxWarpsPerTile;
  static constexpr int kRounds = kParts / kWarpsPerTile;  // K parts a warp walks one after another
  // Short K (few parts per tile): several tiles per block, but never so many that the grid gets
  // fewer blocks than SMs.
  static constexpr int kTilesPerBlockCap = kMaxWarpsPerTile / kWarpsPerTile;
  static constexpr int kTilesPerSM = kTiles / kSMs;
  static constexpr int kTilesPerBlock =
      kTilesPerSM < 1 ? 1 : kTilesPerSM < kTilesPerBlockCap ? kTilesPerSM : kTilesPerBlockCap;
  static constexpr int kWarps = kWarpsPerTile * kTilesPerBlock;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBlocks = (kTiles + kTilesPerBlock - 1) / kTilesPerBlock;
  // Register budget: 64 per thread at every block size (kThreads * kMinBlocks = 1024 threads per SM).
  static constexpr int kMinBlocks = kThreads >= 1024 ? 1 : 1024 / kThreads;
  static constexpr int kRowGroups = (B + 7) / 8;  // mma N = 8 token rows
  // Per-warp C fragments for the cross-warp sum; none when a tile has a single warp.
  static constexpr int kSmemBytes = kWarpsPerTile > 1 ? kWarps * kRowGroups * 32 * 16 : 0;
  // The last tile reads all 16 of its rows: a partial tile (N % 16 != 0) reads past row N-1.
  static constexpr uint64_t kWeightReadBytes = uint64_t(kTiles) * 16 * K * 2;

  static_assert(N >= 1 && K >= 1 && B >= 1 && B <= 32, "dense: bad shape or bucket");
  static_assert(K % W::kLoadK == 0, "dense: K must be a whole number of 16-byte lane loads (multiple of 8)");
  static_assert(kStages % kG == 0 && kParts % kWarpsPerTile == 0, "dense: K does not split evenly over warps");
  static_assert(kThreads <= 1024, "dense: block too large");
  static_assert(kSmemBytes <= 227 * 1024, "dense: shared memory exceeds the H200 per-block limit");
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

// C fragment of lane (g, c) for tile `tile`, token group rg: (weight row g, token 2c), (g, 2c+1),
// (g+8, 2c), (g+8, 2c+1). Writes the entries that are real outputs.
template <int N, typename Out>
__device__ __forceinline__ void store_fragment(Out* y, int rows, int tile, int rg, int lane, float4 v) {
  const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int n = tile * 16 + (lane >> 2) + 8 * (q >> 1);
    const int b = rg * 8 + 2 * (lane & 3) + (q & 1);
    if (b < rows && (N % 16 == 0 || n < N)) y[size_t(b) * N + n] = to_out<Out>(f[q]);
  }
}

}  // namespace dense_detail

template <int N, int K, int B, typename Out>
__global__ void __launch_bounds__(DenseTraits<N, K, B>::kThreads, DenseTraits<N, K, B>::kMinBlocks)
    dense_kernel(const __grid_constant__ DenseParams<N, K, B, Out> p) {
  using T = DenseTraits<N, K, B>;
  using W = typename T::W;
  extern __shared__ float4 red[];  // [kWarps][kRowGroups][32]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int local_tile = warp / T::kWarpsPerTile, part0 = warp % T::kWarpsPerTile;
  const int tile = blockIdx.x * T::kTilesPerBlock + local_tile;
  const bool has_tile = tile < T::kTiles;  // only the last block can hold fewer tiles
  const int row_groups = (p.rows + 7) / 8;
  const uint8_t* w = reinterpret_cast<const uint8_t*>(p.w) + size_t(tile) * 16 * W::template kRowBytes<K>;

  float acc[T::kRowGroups][1][4] = {};
  if (has_tile) {
#pragma unroll 1
    for (int r = 0; r < T::kRounds; ++r) {
      const int k_begin = (r * T::kWarpsPerTile + part0) * T::kG * W::kStageK;
      TileStages<Precision::kBF16, T::kG> st[1];
      load_tile_stages<Precision::kBF16, K, T::kG>(st[0], w, nullptr, k_begin, lane);
      // The same weight registers serve every group of 8 token rows; a lane's B column is token
      // rg * 8 + g, clamped so rows past `rows` are never read (their products are discarded).
#pragma unroll
      for (int rg = 0; rg < T::kRowGroups; ++rg) {
        if (rg < row_groups) {
          const int b = min(rg * 8 + (lane >> 2), p.rows - 1);
          mma_tile_stages<Precision::kBF16, K, T::kG, 1>(st, p.x + size_t(b) * K, k_begin, lane, acc[rg]);
        }
      }
    }
  }

  if constexpr (T::kWarpsPerTile == 1) {
    if (has_tile) {
#pragma unroll
      for (int rg = 0; rg < T::kRowGroups; ++rg)
        if (rg < row_groups)
          dense_detail::store_fragment<N>(p.y, p.rows, tile, rg, lane,
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
        dense_detail::store_fragment<N>(p.y, p.rows, tile, rg, lane, s);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// REQUIRES: device pointers; w, x 16-byte aligned; w readable for DenseTraits::kWeightReadBytes (the
// plan's 64 KiB weight alignment covers a partial last tile whenever that fits in the weight's 64 KiB
// units, e.g. shared_expert_gate 1x2048: 64 KiB); y does not alias w or x. The first call per
// instantiation sets the kernel's shared-memory limit, so make it before any graph capture (as every
// launcher of this directory does).
template <int N, int K, int B, typename Out>
void dense(const DenseParams<N, K, B, Out>& p, cudaStream_t stream) {
  using T = DenseTraits<N, K, B>;
  CHECK(p.rows >= 1 && p.rows <= B, "dense: rows outside [1, B]");
  static bool configured = false;
  if (!configured) {
    CUDA_CHECK(cudaFuncSetAttribute(dense_kernel<N, K, B, Out>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
    configured = true;
  }
  dense_kernel<N, K, B, Out><<<T::kBlocks, T::kThreads, T::kSmemBytes, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace rocket::cuda
