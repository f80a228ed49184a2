// Gated full attention of one stream's prefill piece on the H200 tensor cores (flash attention over
// the paged KV cache): a piece of n tokens at positions pos0 .. pos0+n−1 whose keys and values the
// append kernel (attention_prefill.cuh) has already written into the stream's pages, after the cached
// prefix 0 .. pos0−1. For each piece token r and query head h it
//   1. normalises and rotates the query (q_norm, partial RoPE at its rotary position rope_at[r]; rope.cuh),
//   2. computes softmax(q·kᵀ/√hd)·v over positions 0 .. pos0 + r (causal) with GQA, and
//   3. multiplies by sigmoid(gate) and writes bf16 [n][heads·hd] for o_proj,
// the same contract as attention_prefill's attention part, which runs the decode kernel per token.
//
// Block: kRows = 128 query rows, the kGroup query heads that share one KV head stacked over
// kRows / kGroup piece tokens (row = token · kGroup + head in group), so one K/V tile in shared memory
// serves every head of the group (a3b: 16 tokens × 8 heads). Grid (query tiles, kv_heads); the tiles
// with the longest context go first so the causal tail of the grid is the short tiles.
//
// Per KV tile of 64 tokens, each of the 8 warps takes 16 rows: S = Q Kᵀ by mma.m16n8k16 (bf16 inputs,
// fp32 accumulators; Q and K through ldmatrix), online softmax on the fp32 scores (running max and sum
// per row, in log2 units so exponentials are exp2f), P rounded to bf16 as the A operand of O += P V
// (V through ldmatrix.trans), straight from the S accumulators: the m16n8 accumulator layout of two
// neighbouring score tiles is the m16k16 A layout. The O accumulator of a warp is 16 rows × hd fp32
// in registers (a3b: 128 per thread), which is why a warp takes only 16 rows.
//
// K and V have one tile buffer each, filled by cp.async: tile j + 1's keys load while tile j's
// softmax and P·V run, its values while its scores are taken. Keys at or past the block's last
// position are zero-filled, never read (the page past the piece's end may be unmapped or hold another
// stream's tokens), so masked probabilities (0) never meet a NaN value. Only tiles that reach past
// the block's first query position are masked; tiles past its last query position are never loaded.
// Rows are 16-byte chunks XOR-swizzled by row so the 8 rows of every ldmatrix fall in distinct banks.
// NOTE: double-buffering K and V (200 KiB of shared memory instead of 136) measured the same on the
// H200 (218 vs 216 TFLOP/s at n 4096 after 28672 cached tokens, attention_flash_check).
//
// Precision: q is rounded to bf16 after norm + RoPE (as the HF model, which runs in bf16, holds it),
// P to bf16 for the P·V product, and the row sum is taken over the rounded P so the output is an
// exact weighted average of V under the weights the product used.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/primitives/bulk_copy.cuh"
#include "kernels/cuda/primitives/cp_async.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/fragments.cuh"
#include "kernels/cuda/primitives/smem_limit.cuh"
#include "kernels/cuda/primitives/weight_tile.cuh"
#include "kernels/cuda/rope.cuh"

namespace rocket::cuda {

// Tiles of the flash prefill kernel for one attention shape.
template <class S>
struct FlashTiles {
  static constexpr int kGroup = S::kHeads / S::kKvHeads;  // query heads sharing one KV head
  static constexpr int kHd = S::kHeadDim;
  // NOTE: 4 warps (64 rows) at two blocks per SM ran 181 TFLOP/s at n 4096 after 28672 cached
  // tokens, 8 warps at one block 216 (H200, attention_flash_check): a KV tile serving twice the rows
  // wins over overlapping two blocks' barriers.
  static constexpr int kWarps = 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kWarpRows = 16;                  // one mma M tile per warp
  static constexpr int kRows = kWarps * kWarpRows;      // query rows of a block
  static constexpr int kTokens = kRows / kGroup;        // piece tokens of a block
  static constexpr int kKvTile = 64;                    // KV tokens per tile
  static constexpr int kChunks = kHd / 8;               // 16-byte chunks of a head row
  static constexpr int kRowBytes = kHd * 2;             // one bf16 head row in shared memory
  // Heads a warp loads before normalising any (each HeadOperands is 2 · hd / 32 registers per lane).
  static constexpr int kPrepBatch = kHd / 32 >= 8 ? 4 : 16;

  // Shared memory: Q [kRows][hd] bf16, K and V [kKvTile][hd] bf16, then one fp32 head per warp where
  // norm_rope_head leaves a query before it is rounded into Q.
  static constexpr int kQBytes = kRows * kRowBytes;
  static constexpr int kKvBytes = kKvTile * kRowBytes;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + kKvBytes;
  static constexpr int kScratchOffset = kVOffset + kKvBytes;
  static constexpr int kSmemBytes = kScratchOffset + kWarps * kHd * 4;

  static_assert(kRows % kGroup == 0, "flash: the query heads of a group must tile a block's 128 rows");
  static_assert(kHd % 32 == 0, "flash: norm_rope_head takes a head in whole passes of 32 dims");
  static_assert(kChunks % 8 == 0 || kChunks == 4, "flash: the swizzle needs hd = 32 or a multiple of 64");
  static_assert(kKvTile % 16 == 0 && kHd % 16 == 0, "flash: mma k16 steps over dims and KV tokens");
  static_assert(kSmemBytes <= 227 * 1024, "flash: shared memory exceeds the H200's 227 KiB per block");
  static_assert(kQOffset % 128 == 0 && kKOffset % 128 == 0 && kVOffset % 128 == 0 && kKvBytes % 128 == 0,
                "flash: tiles start on 128-byte lines so the swizzle's banks hold");
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

namespace flash_detail {

// Byte offset of chunk c (8 dims) of row r in a tile of kChunks-chunk rows: the chunk index XORed with
// the row's place among the 8 rows an ldmatrix reads, so those rows hit 8 distinct 16-byte bank groups
// (rows shorter than a 128-byte line share a line: hd 32 puts two rows in one).
template <int kChunks>
__device__ __forceinline__ uint32_t swizzled(int r, int c) {
  constexpr int kRowsPerLine = kChunks >= 8 ? 1 : 8 / kChunks;
  constexpr int kMask = (kChunks >= 8 ? 8 : kChunks) - 1;
  return uint32_t(r * kChunks * 16 + ((c ^ ((r / kRowsPerLine) & kMask)) * 16));
}

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// Issues the loads of KV tile t0 .. t0 + kKvTile − 1 of kv head kvh from the cache (K or V) into the
// tile at dst; tokens at or past t_end are zero-filled.
template <class S>
__device__ __forceinline__ void load_kv_tile(uint32_t dst, const __nv_bfloat16* cache, const AttentionParams<S>& p, int kvh,
                                             int t0, int t_end) {
  using T = FlashTiles<S>;
  for (int i = threadIdx.x; i < T::kKvTile * T::kChunks; i += T::kThreads) {
    const int r = i / T::kChunks, c = i % T::kChunks, t = t0 + r;
    const bool valid = t < t_end;
    const __nv_bfloat16* src = cache;
    if (valid)
      src += int64_t(__ldg(p.page_table + t / S::kPageTokens)) * p.page_stride +
             (int64_t(t % S::kPageTokens) * S::kKvHeads + kvh) * S::kHeadDim + c * 8;
    cp_async16(dst + swizzled<T::kChunks>(r, c), src, valid);
  }
}

}  // namespace flash_detail

// Grid (ceil(n / kTokens), kv_heads), kThreads threads, kSmemBytes dynamic shared memory.
template <class S>
__global__ void __launch_bounds__(FlashTiles<S>::kThreads, 1)
    attention_flash_kernel(const __grid_constant__ AttentionParams<S> p, int n, int pos0) {
  using T = FlashTiles<S>;
  using namespace flash_detail;
  constexpr int kG = T::kGroup, kHd = S::kHeadDim, kC = T::kChunks, kNt = T::kKvTile / 8, kDt = kHd / 8;
  extern __shared__ __align__(128) uint8_t flash_smem[];
  const uint32_t q_s = shared_address(flash_smem + T::kQOffset);
  const uint32_t k_s = shared_address(flash_smem + T::kKOffset), v_s = shared_address(flash_smem + T::kVOffset);
  float* scratch = reinterpret_cast<float*>(flash_smem + T::kScratchOffset) + (threadIdx.x / 32) * kHd;

  const int tile = gridDim.x - 1 - blockIdx.x;  // longest contexts first
  const int kvh = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tok0 = tile * T::kTokens;
  // Keys [0, kv_end) are what any row of this block attends; tiles past it are never loaded.
  const int kv_end = pos0 + min(tok0 + T::kTokens, n);
  const int tiles = (kv_end + T::kKvTile - 1) / T::kKvTile;

  load_kv_tile<S>(k_s, p.k_cache, p, kvh, 0, kv_end);
  cp_async_commit();
  load_kv_tile<S>(v_s, p.v_cache, p, kvh, 0, kv_end);
  cp_async_commit();

  // Queries: each warp normalises and rotates its 16 rows into Q (bf16, swizzled); rows past the piece
  // are zeros (finite scores; never written out). Loads of kPrepBatch heads go out together.
  for (int r0 = 0; r0 < T::kWarpRows; r0 += T::kPrepBatch) {
    HeadOperands<kHd> in[T::kPrepBatch];
#pragma unroll
    for (int b = 0; b < T::kPrepBatch; ++b) {
      const int row = warp * T::kWarpRows + r0 + b, tok = tok0 + row / kG;
      if (tok < n) in[b] = load_head<kHd>(p.qg + (int64_t(tok) * S::kHeads + kvh * kG + row % kG) * 2 * kHd, p.q_norm);
    }
#pragma unroll
    for (int b = 0; b < T::kPrepBatch; ++b) {
      const int row = warp * T::kWarpRows + r0 + b, tok = tok0 + row / kG;
      if (tok < n) norm_rope_head<kHd, S::kRotaryDim>(in[b], p.rope, p.rope_at[tok], p.eps, 1.0f, scratch);
      for (int c = lane; c < kC; c += 32) {
        uint4 w = make_uint4(0, 0, 0, 0);
        if (tok < n) {
          const float4 x0 = *reinterpret_cast<const float4*>(scratch + c * 8);
          const float4 x1 = *reinterpret_cast<const float4*>(scratch + c * 8 + 4);
          w = make_uint4(pack_bf16(x0.x, x0.y), pack_bf16(x0.z, x0.w), pack_bf16(x1.x, x1.y), pack_bf16(x1.z, x1.w));
        }
        *reinterpret_cast<uint4*>(flash_smem + T::kQOffset + swizzled<kC>(row, c)) = w;
      }
      __syncwarp();  // scratch is rewritten by the next head
    }
  }

  // This lane's accumulator rows: g and g + 8 of the warp's 16 (mma C layout), cols 2c, 2c + 1 per n8.
  const int g = lane / 4, c4 = lane % 4;
  int limit[2];  // the last key position each of the two rows attends
#pragma unroll
  for (int h = 0; h < 2; ++h) limit[h] = pos0 + tok0 + (warp * T::kWarpRows + g + 8 * h) / kG;
  const int block_first = pos0 + tok0;  // the smallest limit of the block
  // HF: scaling = head_dim ** -0.5 on fp32 scores; with log2 e for exp2f.
  const float scale = float(1.0 / sqrt(double(kHd))) * 1.4426950408889634f;

  float o[kDt][4];
#pragma unroll
  for (int i = 0; i < kDt; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // running max (log2 units), this lane's sum

  // ldmatrix row addresses of this lane (the tile base and k offset are added per step).
  const int q_row = warp * T::kWarpRows + lane % 16, q_half = lane / 16;          // A: rows, k half
  const int k_row = lane % 8 + (lane / 16) * 8, k_half = (lane / 8) % 2;          // B (K): tokens, k half
  const int v_row = lane % 8 + ((lane / 8) % 2) * 8, v_half = lane / 16;          // B (V, trans): tokens, n half

  for (int j = 0; j < tiles; ++j) {
    const int t0 = j * T::kKvTile;
    cp_async_wait<1>();  // K of tile j has landed (V of tile j may be in flight)
    __syncthreads();
    // S = Q Kᵀ for the warp's 16 rows and the tile's 64 keys (raw dot products).
    float s[kNt][4];
#pragma unroll
    for (int i = 0; i < kNt; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kd = 0; kd < kHd / 16; ++kd) {
      uint32_t a[4];
      ldmatrix_x4(a, q_s + swizzled<kC>(q_row, 2 * kd + q_half));
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, k_s + swizzled<kC>(np * 16 + k_row, 2 * kd + k_half));
        mma_bf16_16816(s[2 * np], a, b[0], b[1]);
        mma_bf16_16816(s[2 * np + 1], a, b[2], b[3]);
      }
    }

    // K is free once every warp has its scores: tile j + 1's keys load during softmax and P V.
    __syncthreads();
    if (j + 1 < tiles) load_kv_tile<S>(k_s, p.k_cache, p, kvh, t0 + T::kKvTile, kv_end);
    cp_async_commit();  // possibly empty: the group count stays two per tile

    // Causal mask, only where the tile reaches past the block's first query position.
    if (t0 + T::kKvTile - 1 > block_first) {
#pragma unroll
      for (int i = 0; i < kNt; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (t0 + i * 8 + 2 * c4 + (e & 1) > limit[e >> 1]) s[i][e] = -INFINITY;
    }

    // Online softmax. Key 0 is in every row's range, so after tile 0 each running max is finite.
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < kNt; ++i) mx = fmaxf(mx, fmaxf(s[i][2 * h], s[i][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[h], mx * scale);
      alpha[h] = exp2f(m[h] - m_new);
      m[h] = m_new;
    }
    // P (bf16) as the A operand of P V: k16 step kk spans score tiles 2kk, 2kk + 1.
    uint32_t pa[kNt / 2][4];
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < kNt; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t w = pack_bf16(exp2f(fmaf(s[i][2 * h], scale, -m[h])), exp2f(fmaf(s[i][2 * h + 1], scale, -m[h])));
        sum[h] += bf16_lo(w) + bf16_hi(w);
        pa[i / 2][(i % 2) * 2 + h] = w;
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + sum[h];
#pragma unroll
    for (int i = 0; i < kDt; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }

    cp_async_wait<1>();  // V of tile j has landed (K of tile j + 1 may be in flight)
    __syncthreads();
    // O += P V.
#pragma unroll
    for (int kk = 0; kk < kNt / 2; ++kk)
#pragma unroll
      for (int dp = 0; dp < kDt / 2; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_s + swizzled<kC>(kk * 16 + v_row, 2 * dp + v_half));
        mma_bf16_16816(o[2 * dp], pa[kk], b[0], b[1]);
        mma_bf16_16816(o[2 * dp + 1], pa[kk], b[2], b[3]);
      }
    // V is free once every warp has its product: tile j + 1's values load during its scores.
    __syncthreads();
    if (j + 1 < tiles) load_kv_tile<S>(v_s, p.v_cache, p, kvh, t0 + T::kKvTile, kv_end);
    cp_async_commit();
  }

  // Normalise, gate (as torch: 1 / (1 + exp(-x))) and store the rows of the piece.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    const int row = warp * T::kWarpRows + g + 8 * h, tok = tok0 + row / kG;
    if (tok >= n) continue;
    const int64_t head = int64_t(tok) * S::kHeads + kvh * kG + row % kG;
    const __nv_bfloat16* gate = p.qg + head * 2 * kHd + kHd;
    __nv_bfloat16* out = p.out + head * kHd;
    const float inv = 1.0f / l[h];
#pragma unroll
    for (int i = 0; i < kDt; ++i) {
      const int d = i * 8 + 2 * c4;
      const float2 gf = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(gate + d));
      *reinterpret_cast<__nv_bfloat162*>(out + d) = __floats2bfloat162_rn(o[i][2 * h] * inv * (1.0f / (1.0f + expf(-gf.x))),
                                                                          o[i][2 * h + 1] * inv * (1.0f / (1.0f + expf(-gf.y))));
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// Attention of a prefill piece of n tokens of one stream at positions pos0 .. pos0 + n − 1 (host
// ints: the grid depends on n; p.pos and p.partial are not read). p.page_table is the stream's table
// row, rows of qg, rope_at and out are the piece's tokens. REQUIRES: device pointers; the piece's keys and values
// already appended (attention_append_kernel) and pages 0 .. (pos0 + n − 1) / kPageTokens mapped;
// k_cache, v_cache, page_stride 16-byte aligned; qg and out 4-byte aligned. The first call sets the
// kernel's shared-memory limit, so make it before any graph capture (as every launcher of this
// directory does).
template <class S>
void attention_flash(const AttentionParams<S>& p, int n, int pos0, cudaStream_t stream) {
  using T = FlashTiles<S>;
  CHECK(p.qg && p.q_norm && p.k_cache && p.v_cache && p.page_table && p.rope_at && p.out, "attention_flash: null pointer");
  CHECK(n >= 1 && pos0 >= 0, "attention_flash: empty piece or negative position");
  CHECK(int64_t(pos0) + n <= int64_t(p.table_width) * S::kPageTokens, "attention_flash: piece past the page table");
  CHECK(p.page_stride % 8 == 0 && reinterpret_cast<uintptr_t>(p.k_cache) % 16 == 0 && reinterpret_cast<uintptr_t>(p.v_cache) % 16 == 0,
        "attention_flash: KV cache must keep 16-byte alignment");
  raise_smem_limit_once<attention_flash_kernel<S>>(T::kSmemBytes);
  const dim3 grid((n + T::kTokens - 1) / T::kTokens, S::kKvHeads);
  attention_flash_kernel<S><<<grid, T::kThreads, T::kSmemBytes, stream>>>(p, n, pos0);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace rocket::cuda
