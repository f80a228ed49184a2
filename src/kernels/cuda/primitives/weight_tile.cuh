// One warp's decode tile on the tensor cores: 16 rows of a weight matrix W [rows][K] (bf16, or NVFP4 or
// block FP8 dequantised in registers) times up to 8 bf16 activation rows, over a range of K, accumulated in
// fp32 by mma.m16n8k16 (bf16 inputs). Decode is weight-streaming bound: a tile's weights are loaded
// once into registers and reused for every group of 8 activation rows.
//
// Lane (g = lane / 4, c = lane % 4) loads 16 bytes of weight rows g and g + 8 per stage (32 NVFP4, 16
// FP8 or 8 bf16 weights); the four lanes of a row read 64 contiguous bytes, so each load instruction covers
// whole 32-byte sectors. A stage of a warp thus spans kStageK = 4 * kLoadK columns. The same lane
// feeds the mma B operand for activation row g at exactly the columns it holds weights for (the k
// order inside an mma is free as long as A and B agree), so no data moves between lanes.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "fuel/chemistry.h"
#include "kernels/cuda/primitives/fp8.cuh"
#include "kernels/cuda/primitives/nvfp4.cuh"
#include "kernels/tiling/weight_tile.h"

namespace rocket::cuda {

template <Precision P>
struct WeightTileTraits {
  static constexpr bool kNvfp4 = P == Precision::kNVFP4;
  static constexpr bool kFp8 = P == Precision::kFP8Block;
  static constexpr bool kScaled = kNvfp4 || kFp8;  // the weights come with block scales
  static constexpr int kLoadK = tiling::load_k(P);    // weights per lane per 16-byte load
  static constexpr int kStageK = tiling::stage_k(P);  // columns per warp stage
  static constexpr int kOctets = kLoadK / 8;      // 8-column groups per load (one mma k16 pair each)
  template <int K>
  static constexpr int kRowBytes = tiling::row_bytes(P, K);
  template <int K>
  static constexpr int kScaleRowBytes = K / 16;  // nvfp4 e4m3 block scales
  template <int K>
  static constexpr int kStages = tiling::stages(P, K);
  // Byte offset of the scales of weight row `row` (a tile's first row): NVFP4 its row of per-16
  // codes, FP8 its 128-row block's row of fp32 block scales.
  template <int K>
  static constexpr int kFp8ScaleRowBytes = tiling::fp8_scale_cols(K) * 4;
  template <int K>
  __host__ __device__ static constexpr size_t scale_at(int row) {
    return kNvfp4 ? size_t(row) * kScaleRowBytes<K> : kFp8 ? size_t(row / tiling::kFp8Block) * kFp8ScaleRowBytes<K> : 0;
  }
  // A block scale covers whole stages (and so one fp32 per stage): stages start at multiples of kStageK.
  static_assert(!kFp8 || tiling::kFp8Block % kStageK == 0, "weight tile: an FP8 stage crosses a scale block");
};

// kG stages of rows g and g + 8 of one tile, as loaded: the registers a warp holds in flight.
template <Precision P, int kG>
struct TileStages {
  uint4 w[2][kG];
  // nvfp4: the two block scale codes (nvfp4_code.h) of the 32 weights in w[h][s], in 16-bit half s % 2 of
  // scale[h][s / 2] (packed: registers are what limits resident warps).
  uint32_t scale[2][(kG + 1) / 2];
  // fp8: the block scale of stage s (rows g and g + 8 share their 128-row block).
  float block_scale[P == Precision::kFP8Block ? kG : 1];
};

// ---------------------------------------------------------------------------------------------------
// Device helpers

// Hides the stages' values from the optimiser (an empty asm that "may change" them): what is computed
// from them after this point cannot be hoisted above it.
template <Precision P, int kG>
__device__ __forceinline__ void opaque(TileStages<P, kG>& t) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int s = 0; s < kG; ++s) asm volatile("" : "+r"(t.w[h][s].x), "+r"(t.w[h][s].y), "+r"(t.w[h][s].z), "+r"(t.w[h][s].w));
}

// Weights are read exactly once per step: keep them out of L1 so activations stay there.
__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Pulls the 128-byte line holding p into L2: weights a kernel will stream, fetched before its chain
// wait (dependent_launch.cuh).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// d += A (16x16, row) * B (16x8, col), bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A column past K (a tile narrower than one stage) loads nothing: zero weights and zero activations,
// so an unwritten activation (NaN) cannot leak into the product.
template <int K, int kStageK>
__device__ __forceinline__ bool column_in_range(int k0) {
  return K % kStageK == 0 || k0 < K;
}

// Issues every load of stages [0, kG) starting at column k_begin of the tile whose row 0 is at w
// (nvfp4, fp8: scales of row 0 at scale, WeightTileTraits::scale_at).
template <Precision P, int K, int kG>
__device__ __forceinline__ void load_tile_stages(TileStages<P, kG>& t, const uint8_t* w, const uint8_t* scale,
                                                 int k_begin, int lane) {
  using T = WeightTileTraits<P>;
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int s = 0; s < kG; ++s) {
    const int k0 = k_begin + s * T::kStageK + c * T::kLoadK;
    const bool in = column_in_range<K, T::kStageK>(k0);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = g + 8 * h;
      const size_t at = size_t(row) * T::template kRowBytes<K> + (T::kNvfp4 ? k0 / 2 : T::kFp8 ? k0 : 2 * k0);
      t.w[h][s] = in ? ld_stream(w + at) : make_uint4(0, 0, 0, 0);
      if constexpr (T::kNvfp4) {
        const uint32_t v = in ? __ldg(reinterpret_cast<const uint16_t*>(scale + size_t(row) * T::template kScaleRowBytes<K> + k0 / 16)) : 0u;
        t.scale[h][s / 2] = s % 2 ? t.scale[h][s / 2] | v << 16 : v;
      }
    }
    if constexpr (T::kFp8) t.block_scale[s] = in ? __ldg(reinterpret_cast<const float*>(scale) + k0 / tiling::kFp8Block) : 0.0f;
  }
}

// acc[m] += tile m (rows g, g + 8) times activation row x (this lane's B column g) over the loaded
// stages, for kM tiles that share the activations (gate and up).
template <Precision P, int K, int kG, int kM>
__device__ __forceinline__ void mma_tile_stages(const TileStages<P, kG> (&t)[kM], const __nv_bfloat16* x, int k_begin,
                                                int lane, float (&acc)[kM][4]) {
  using T = WeightTileTraits<P>;
  const int c = lane & 3;
#pragma unroll
  for (int s = 0; s < kG; ++s) {
    const int k0 = k_begin + s * T::kStageK + c * T::kLoadK;
    const bool in = column_in_range<K, T::kStageK>(k0);
    uint32_t sw[kM][2][2];  // nvfp4 scale words [tile][row half][first/second 16 columns]
    if constexpr (T::kNvfp4) {
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int q = 0; q < 2; ++q) sw[m][h][q] = nvfp4_scale_word(t[m].scale[h][s / 2], 2 * (s % 2) + q);
    }
#pragma unroll
    for (int o = 0; o < T::kOctets; ++o) {
      const uint4 xv = in ? __ldg(reinterpret_cast<const uint4*>(x + k0 + 8 * o)) : make_uint4(0, 0, 0, 0);
      // B fragments [mma half][b0, b1]: columns in pairs (2j, 2j + 1), as the weight words (and the
      // nvfp4 images, nvfp4_code::images) hold them.
      const uint32_t b[2][2] = {{xv.x, xv.y}, {xv.z, xv.w}};
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        uint32_t a[2][4];  // [row half][word]: word j covers this octet's columns per the pairing above
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint4 raw = t[m].w[h][s];
          if constexpr (T::kNvfp4) {
            const uint32_t q = o == 0 ? raw.x : o == 1 ? raw.y : o == 2 ? raw.z : raw.w;
            uint32_t img[4];
            nvfp4_code::images(q, img);
#pragma unroll
            for (int j = 0; j < 4; ++j) a[h][j] = nvfp4_scaled(img[j], sw[m][h][o / 2]);
          } else if constexpr (T::kFp8) {
            // Octet o is the load's bytes 8o..8o + 7: words 2o (columns 0..3) and 2o + 1 (4..7).
            const float sc = t[m].block_scale[s];
            fp8_scaled_quad(o == 0 ? raw.x : raw.z, sc, a[h][0], a[h][1]);
            fp8_scaled_quad(o == 0 ? raw.y : raw.w, sc, a[h][2], a[h][3]);
          } else {
            a[h][0] = raw.x;
            a[h][1] = raw.y;
            a[h][2] = raw.z;
            a[h][3] = raw.w;
          }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const uint32_t frag[4] = {a[0][2 * half], a[1][2 * half], a[0][2 * half + 1], a[1][2 * half + 1]};
          mma_bf16_16816(acc[m], frag, b[half][0], b[half][1]);
        }
      }
    }
  }
}

}  // namespace rocket::cuda
