// Gated DeltaNet over a prefill piece of one stream in chunks of 64 tokens (the WY / UT-transform form;
// host reference and its derivation: kernels/host/gdn_chunked.h). Same gates, l2 norms, q scale and
// gated norm as the recurrent kernel (gdn.cuh), so the two agree within fp32 rounding:
//
//   q, k  = l2norm(q), l2norm(k) of the value head's key head (h / (Hv/Hk)); q *= 1/sqrt(Kd)
//   beta  = sigmoid(b);  g = -exp(A_log) · softplus(a + dt_bias)  (log decay; gc = its sum in the chunk)
//   per chunk: (I + A) [W | U] = diag(beta) [G ⊙ K | V],  A[t][i] = beta_t (k_t · k_i) G_t/G_i (i < t)
//              U' = U − W S;  O = (G ⊙ Q) S + tril_incl(Q Kᵀ ⊙ G_t/G_i) U';  S ← G_C S + (K ⊙ G_C/G)ᵀ U'
//   out   = norm_w · (o · rsqrt(mean(o²) + eps)) · silu(z)           (per value head, over Vd)
//
// Three kernels:
//  1. prepare: one block per (chunk, value head), all in parallel: gates, normalised q and k, Q Kᵀ and
//     K Kᵀ, [W | U] by forward substitution (one column per thread, in registers), into the workspace.
//  2. scan: one block per (value head, kGdnChunkedColumns columns), the chunks in order. The columns of
//     S are independent (only sums over Kd couple rows), so each block keeps its Kd x 32 slice in shared
//     memory for the whole piece and runs the three products per chunk on the tensor cores; the next
//     chunk's operands stream in with cp.async behind the current chunk's products. It writes the state
//     after chunk j to snapshot slot capture_at[j] (when >= 0) and the final state back.
//  3. norm: one warp per (token, value head): the gated norm needs sums over all Vd, which kernel 2
//     splits over blocks.
//
// Precision: fp32 throughout. The scan's products feed a state carried over thousands of tokens, where
// tf32's 11-bit operands would not do, so they are 3xTF32 (mma.m16n8k8.tf32 on each operand's big and
// small tf32 parts, the small x small term dropped): ~2^-20 of each product, within a few units of fp32
// rounding. Kernel 1 stays on the CUDA cores (its forward substitution is a dependent chain).
// NOTE: measured (h200-prefill.md, 2026-12-05): the tensor-core scan is only ~7% faster than the fp32
// CUDA-core one (a3b, 2048 tokens: 336 -> 313 us). It is issue-bound at one block of 8 warps per SM
// (ncu: 0.53 issued warps per scheduler, 12.5% occupancy), and most instructions are the operand splits
// (two cvt and a subtract per element, redone at every fragment load), and a deeper cp.async prefetch
// changed nothing. What would pay: operands split once (s at its update, the records by kernel 1) and
// more warps per block.
// Since then: the splits without cvt (tf32_split) and the copies at compile-time counts (cp_async_rows)
// take the a3b scan from 2680 to 1416 SASS instructions (static count of the cubin's .text), and from 318
// to 254 us at 2048 tokens (H100, 2026-12-05T19:09Z).
//
// State layout: as gdn.cuh, fp32 [Hv][Kd][Vd] for this layer of the stream's slot (the caller passes the
// pointer); a snapshot slot holds the same layer at snapshot_state + slot * snapshot_stride.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/gdn.cuh"
#include "kernels/cuda/primitives/cp_async.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/reduce.cuh"
#include "kernels/cuda/primitives/smem_limit.cuh"
#include "kernels/tiling/gdn.h"

namespace rocket::cuda {

struct GdnChunkedParams {
  const __nv_bfloat16* qkv = nullptr;      // [tokens][kConvDim]: conv output, q | k | v
  const __nv_bfloat16* a = nullptr;        // [tokens][Hv]: in_proj_a output
  const __nv_bfloat16* b = nullptr;        // [tokens][Hv]: in_proj_b output
  const __nv_bfloat16* z = nullptr;        // [tokens][kValueDim]: in_proj_z output
  const __nv_bfloat16* a_log = nullptr;    // [Hv]
  const __nv_bfloat16* dt_bias = nullptr;  // [Hv]
  const __nv_bfloat16* norm_w = nullptr;   // [Vd]: the gated norm's gain (plain, not zero-centred)
  float* state = nullptr;                  // this layer's recurrent state of the stream's slot
  float* snapshot_state = nullptr;         // this layer's recurrent state in snapshot slot 0
  int64_t snapshot_stride = 0;             // floats between snapshot slots
  const int32_t* capture_at = nullptr;     // [chunks of the piece], device: snapshot slot or -1; may be null
  float* workspace = nullptr;              // tiling::gdn_chunked_workspace_floats(..., max_tokens) floats
  int64_t workspace_floats = 0;
  __nv_bfloat16* out = nullptr;            // [tokens][kValueDim]
  int tokens = 1;
  int pos0 = 0;                            // absolute position of the first token: chunks end at multiples of 64
  float eps = 1e-6f;                       // the gated norm's epsilon
};

// Tiling of the three kernels for one GdnShape; every block has kThreads threads.
template <class S>
struct GdnChunkedShape {
  static constexpr int C = tiling::kGdnChunk;
  static constexpr int kKd = S::kKDim, kVd = S::kVDim;
  static constexpr int kCols = tiling::kGdnChunkedColumns;  // columns of S per scan block
  static constexpr int kSplit = kVd / kCols;                 // scan blocks per value head
  static constexpr int kThreads = 256;
  // Scan products as m16n8k8 tiles: warp w owns rows 16 (w / 2).. and columns 16 (w % 2).. of the C x kCols
  // outputs (U', O), and kStateTiles 16 x 8 tiles of the Kd x kCols state (a3b: rows 16 w.., all columns).
  // Operand pitches are 8 mod 32 floats, so a fragment's 32 lanes (row c / c + 4, column g) read 32
  // distinct banks.
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kStateRowTiles = kKd / 16, kWarpsPerRowTile = kWarps / kStateRowTiles;
  static constexpr int kStateTiles = kStateRowTiles * (kCols / 8) / kWarps;  // n-tiles of one row tile per warp
  static constexpr int kColPitch = kCols + 8;  // s, u: [row][column]
  static constexpr int kTokPitch = C + 8;      // Wᵀ, (G ⊙ Q)ᵀ, Pᵀ: [Kd or C][token]
  static constexpr int kKeyPitch = kKd + 8;    // K ⊙ G_C/G: [token][Kd]
  static constexpr int kQkPitch = kKd + 4;  // q, k rows in shared memory: float4 reads of 8 rows, no bank conflict
  static constexpr int kPPitch = C + 1;     // Q Kᵀ read by column when transposed

  // Offsets of one (chunk, head) record in the workspace (floats; tiling::gdn_chunk_floats).
  static constexpr int64_t kWt = 0, kQgT = kWt + int64_t(kKd) * C, kKend = kQgT + int64_t(kKd) * C,
                           kU = kKend + int64_t(C) * kKd, kPT = kU + int64_t(C) * kVd, kGc = kPT + int64_t(C) * C;
  static constexpr int64_t kRecord = tiling::gdn_chunk_floats(kKd, kVd);
  // Where the core output (fp32 [tokens][Hv][Vd]) starts: after the records of the chunks a piece of
  // `tokens` tokens can span (tiling::gdn_chunks, restated for device code).
  __host__ __device__ static constexpr int64_t output_offset(int tokens) {
    return int64_t((tokens + 2 * C - 2) / C) * S::kVHeads * kRecord;
  }
  static_assert(output_offset(1) == int64_t(tiling::gdn_chunks(1)) * S::kVHeads * kRecord &&
                    output_offset(2048) == int64_t(tiling::gdn_chunks(2048)) * S::kVHeads * kRecord,
                "gdn chunked: output offset differs from the tiling's chunk count");

  static_assert(kGc + 4 == kRecord, "gdn chunked: workspace record layout");
  static_assert(C == 64 && kCols == 32 && kThreads == 256, "the scan's 8 warps tile 64 x 32 outputs as 4 x 2 of 16 x 16");
  static_assert(kKd % 16 == 0 && kWarps % kStateRowTiles == 0 && kStateTiles >= 1, "the scan's warps share the state tiles evenly");
  static_assert(kVd % kCols == 0, "value columns split evenly over scan blocks");
  static_assert(kKd % 32 == 0 && kVd % 32 == 0, "q/k norms and the gated norm are warp sums");
};

template <class S>
struct GdnPrepareSmem {
  using T = GdnChunkedShape<S>;
  float qn[T::C][T::kQkPitch];  // normalised, scaled q (zero past the chunk's tokens)
  float kn[T::C][T::kQkPitch];  // normalised k
  float a[T::C][T::C];          // A (strictly lower), read a row at a time
  float p[T::C][T::kPPitch];    // Q Kᵀ ⊙ G_t/G_i on and below the diagonal, zero above
  double gc[T::C];              // cumulative log decay
  float g[T::C], beta[T::C], G[T::C];
  float to_end[T::C];           // G_C / G_t
};

template <class S>
struct GdnScanSmem {
  using T = GdnChunkedShape<S>;
  float s[T::kKd][T::kColPitch];     // this block's state slice
  float wt[T::kKd][T::kTokPitch];    // Wᵀ
  float qgt[T::kKd][T::kTokPitch];   // (G ⊙ Q)ᵀ
  float kend[T::C][T::kKeyPitch];    // K ⊙ G_C/G
  float pt[T::C][T::kTokPitch];      // masked (Q Kᵀ ⊙ G_t/G_i)ᵀ
  float u[2][T::C][T::kColPitch];    // U, then U' in place; two chunks in flight
};

// Chunk j of a piece starting at absolute position pos0: first local token and token count.
struct ChunkSpan {
  int start, count;
};
__device__ __forceinline__ ChunkSpan chunk_span(int j, int pos0, int tokens) {
  constexpr int C = tiling::kGdnChunk;
  const int first = C - pos0 % C;
  const int start = j == 0 ? 0 : first + (j - 1) * C;
  const int end = min(tokens, j == 0 ? first : start + C);
  return {start, end - start};
}

// kRows x kCols floats (kCols a multiple of 4, 16-byte aligned rows) from global (pitch kGPitch) to
// shared memory (pitch kSPitch) by the whole block. Everything is a compile-time constant, so a thread's
// copies are straight-line code: its column stays put and its row steps by kThreads / (kCols / 4).
// NOTE: a loop over `i = tid; i < rows * cols / 4; i += threads` compiled to loop control and remainder
// branches around every copy (the MoE piece GEMM's SASS showed it; moe_piece.cuh).
template <int kThreads, int kRows, int kCols, int kSPitch, int kGPitch>
__device__ __forceinline__ void cp_async_rows(float* smem, const float* global, int tid) {
  constexpr int kVecs = kCols / 4, kTotal = kRows * kVecs, kRowStep = kThreads / kVecs;
  static_assert(kCols % 4 == 0 && kThreads % kVecs == 0, "gdn chunked: a thread keeps one 16-byte column");
  const int r0 = tid / kVecs, col = 4 * (tid % kVecs);
#pragma unroll
  for (int i = 0; i < (kTotal + kThreads - 1) / kThreads; ++i)
    if (kTotal % kThreads == 0 || tid + i * kThreads < kTotal)
      cp_async16(smem + (r0 + i * kRowStep) * kSPitch + col, global + int64_t(r0 + i * kRowStep) * kGPitch + col);
}

// 3xTF32: an fp32 operand as big + small tf32 parts. big = x rounded to its top 19 bits (half a tf32
// ulp added to the bits, then masked: cvt.rna's result for every finite x); small = the rest (x - big,
// exact in fp32), truncated. An a·b then misses a_small·b_small (< 2^-22 |a||b|) and small's truncation
// (< 2^-21 in each cross term), ~2^-20 in all. A NaN whose bits wrap to -0 in big stays in small, so
// it still propagates.
// NOTE: not cvt.rna.tf32.f32, which sm_90a has no instruction for: ptxas emulates it with a finiteness
// test, an add, a select and a mask (the SASS of c2c147e), about eight instructions per element split
// against four here, and the splits were most of the scan's instructions.
struct Tf32Split {
  uint32_t big, small;
};
__device__ __forceinline__ Tf32Split tf32_split(float x) {
  constexpr uint32_t kTf32 = 0xffffe000u;  // sign, exponent and the 10 mantissa bits tf32 keeps
  Tf32Split r;
  r.big = (__float_as_uint(x) + 0x1000u) & kTf32;
  r.small = __float_as_uint(x - __uint_as_float(r.big)) & kTf32;
  return r;
}
__device__ __forceinline__ void mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// The m16n8k8 A fragment of rows m0.., columns k0.. of a matrix stored transposed (at[k][m], pitch P):
// lane (g, c) holds (g, c), (g + 8, c), (g, c + 4), (g + 8, c + 4).
struct FragA {
  Tf32Split x[4];
};
template <int P>
__device__ __forceinline__ FragA frag_a_t(const float* at, int m0, int k0, int g, int c) {
  const float* p = at + (k0 + c) * P + m0 + g;
  return FragA{{tf32_split(p[0]), tf32_split(p[8]), tf32_split(p[4 * P]), tf32_split(p[4 * P + 8])}};
}
// The B fragment of rows (k) k0.., columns n0.. of b[k][n] (pitch P): lane (g, c) holds (c, g), (c + 4, g).
struct FragB {
  Tf32Split x[2];
};
template <int P>
__device__ __forceinline__ FragB frag_b(const float* b, int k0, int n0, int g, int c) {
  const float* p = b + (k0 + c) * P + n0 + g;
  return FragB{{tf32_split(p[0]), tf32_split(p[4 * P])}};
}
// d += a · b in 3xTF32: the two small cross terms first, the big product last.
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const FragA& a, const FragB& b) {
  mma_tf32(d, a.x[0].small, a.x[1].small, a.x[2].small, a.x[3].small, b.x[0].big, b.x[1].big);
  mma_tf32(d, a.x[0].big, a.x[1].big, a.x[2].big, a.x[3].big, b.x[0].small, b.x[1].small);
  mma_tf32(d, a.x[0].big, a.x[1].big, a.x[2].big, a.x[3].big, b.x[0].big, b.x[1].big);
}

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

template <class S>
__global__ void __launch_bounds__(GdnChunkedShape<S>::kThreads, 2) gdn_chunk_prepare_kernel(const __grid_constant__ GdnChunkedParams p) {
  using T = GdnChunkedShape<S>;
  constexpr int C = T::C, Kd = T::kKd, Vd = T::kVd, kWarps = T::kThreads / 32;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  GdnPrepareSmem<S>& sm = *reinterpret_cast<GdnPrepareSmem<S>*>(smem_raw);
  const int j = blockIdx.x, h = blockIdx.y, kh = h / S::kGroup;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const ChunkSpan span = chunk_span(j, p.pos0, p.tokens);
  float* rec = p.workspace + (int64_t(j) * S::kVHeads + h) * T::kRecord;

  // Gates, as gdn.cuh: beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias). Rows past the chunk's
  // tokens get g = 0 and beta = 0 (with q = k = v = 0 below) and so add nothing to any product.
  if (tid < C) {
    float g = 0.0f, beta = 0.0f;
    if (tid < span.count) {
      const int64_t row = span.start + tid;
      const float x = __bfloat162float(p.a[row * S::kVHeads + h]) + __bfloat162float(p.dt_bias[h]);
      const float softplus = x > 20.0f ? x : log1pf(expf(x));
      g = -expf(__bfloat162float(p.a_log[h])) * softplus;
      beta = 1.0f / (1.0f + expf(-__bfloat162float(p.b[row * S::kVHeads + h])));
    }
    sm.g[tid] = g, sm.beta[tid] = beta;
  }
  // q, k of the key head, l2-normalised (one warp per token); HF's q scale 1/sqrt(Kd) from double.
  const float q_scale = float(1.0 / sqrt(double(Kd)));
  for (int t = warp; t < C; t += kWarps) {
    float q[Kd / 32], k[Kd / 32];
    float qq = 0.0f, kk = 0.0f;
    const __nv_bfloat16* row = p.qkv + (int64_t(span.start) + t) * S::kConvDim + kh * Kd;
#pragma unroll
    for (int c = 0; c < Kd / 32; ++c) {
      q[c] = t < span.count ? __bfloat162float(row[c * 32 + lane]) : 0.0f;
      k[c] = t < span.count ? __bfloat162float(row[S::kKeyDim + c * 32 + lane]) : 0.0f;
      qq += q[c] * q[c], kk += k[c] * k[c];
    }
    const float inv_q = 1.0f / sqrtf(warp_sum(qq) + 1e-6f), inv_k = 1.0f / sqrtf(warp_sum(kk) + 1e-6f);
#pragma unroll
    for (int c = 0; c < Kd / 32; ++c) {
      sm.qn[t][c * 32 + lane] = q[c] * inv_q * q_scale;
      sm.kn[t][c * 32 + lane] = k[c] * inv_k;
    }
  }
  __syncthreads();
  if (tid == 0) {
    // In double: G_t/G_i = exp(gc_t - gc_i) then carries one rounding, not one per token between.
    double cum = 0.0;
    for (int t = 0; t < C; ++t) sm.gc[t] = cum += double(sm.g[t]);
  }
  __syncthreads();
  if (tid < C) {
    sm.G[tid] = expf(float(sm.gc[tid]));
    sm.to_end[tid] = expf(float(sm.gc[C - 1] - sm.gc[tid]));
  }

  // Q Kᵀ and K Kᵀ (C x C, Kd-term dot products): thread (ty, tx) owns rows ty + 16r and columns tx + 16c,
  // so the 8 rows a quarter warp reads as float4 fall in distinct banks (pitch Kd + 4).
  {
    const int ty = tid / 16, tx = tid % 16;
    float qk[4][4] = {}, kk[4][4] = {};
#pragma unroll 2
    for (int d = 0; d < Kd; d += 4) {
      float4 qt[4], kt[4], ki[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        qt[r] = *reinterpret_cast<const float4*>(&sm.qn[ty + 16 * r][d]);
        kt[r] = *reinterpret_cast<const float4*>(&sm.kn[ty + 16 * r][d]);
        ki[r] = *reinterpret_cast<const float4*>(&sm.kn[tx + 16 * r][d]);
      }
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          qk[r][c] += qt[r].x * ki[c].x + qt[r].y * ki[c].y + qt[r].z * ki[c].z + qt[r].w * ki[c].w;
          kk[r][c] += kt[r].x * ki[c].x + kt[r].y * ki[c].y + kt[r].z * ki[c].z + kt[r].w * ki[c].w;
        }
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int t = ty + 16 * r, i = tx + 16 * c;
        const float ratio = i <= t ? expf(float(sm.gc[t] - sm.gc[i])) : 0.0f;  // G_t / G_i
        sm.a[t][i] = i < t ? sm.beta[t] * kk[r][c] * ratio : 0.0f;
        sm.p[t][i] = qk[r][c] * ratio;
      }
  }
  __syncthreads();

  // [W | U] = (I + A)^-1 diag(beta) [G ⊙ K | V]: forward substitution, one column per thread, the column
  // in registers (rows are independent across columns, so no thread waits for another).
  for (int col = tid; col < Kd + Vd; col += T::kThreads) {
    float x[C];
    if (col < Kd) {
#pragma unroll
      for (int t = 0; t < C; ++t) x[t] = sm.beta[t] * sm.G[t] * sm.kn[t][col];
    } else {
      const __nv_bfloat16* v = p.qkv + int64_t(span.start) * S::kConvDim + 2 * S::kKeyDim + h * Vd + (col - Kd);
#pragma unroll
      for (int t = 0; t < C; ++t) x[t] = t < span.count ? sm.beta[t] * __bfloat162float(v[int64_t(t) * S::kConvDim]) : 0.0f;
    }
#pragma unroll
    for (int t = 1; t < C; ++t) {
#pragma unroll
      for (int i = 0; i < t; i += 4) {
        const float4 a4 = *reinterpret_cast<const float4*>(&sm.a[t][i]);  // zero from column t on
        x[t] -= a4.x * x[i];
        if (i + 1 < t) x[t] -= a4.y * x[i + 1];
        if (i + 2 < t) x[t] -= a4.z * x[i + 2];
        if (i + 3 < t) x[t] -= a4.w * x[i + 3];
      }
    }
    if (col < Kd) {
      float4* wt = reinterpret_cast<float4*>(rec + T::kWt + int64_t(col) * C);
#pragma unroll
      for (int t = 0; t < C; t += 4) wt[t / 4] = make_float4(x[t], x[t + 1], x[t + 2], x[t + 3]);
    } else {
#pragma unroll
      for (int t = 0; t < C; ++t) rec[T::kU + int64_t(t) * Vd + (col - Kd)] = x[t];
    }
  }

  // (G ⊙ Q)ᵀ, K ⊙ G_C/G, the transposed masked P, and G_C, at compile-time counts (no loop control).
  static_assert(Kd * C % T::kThreads == 0 && C * C % T::kThreads == 0, "gdn chunked: records split evenly over threads");
#pragma unroll 8
  for (int n = 0; n < Kd * C / T::kThreads; ++n) {
    const int i = tid + n * T::kThreads, d = i / C, t = i % C;
    rec[T::kQgT + i] = sm.qn[t][d] * sm.G[t];
  }
#pragma unroll 8
  for (int n = 0; n < C * Kd / T::kThreads; ++n) {
    const int i = tid + n * T::kThreads, t = i / Kd, d = i % Kd;
    rec[T::kKend + i] = sm.kn[t][d] * sm.to_end[t];
  }
#pragma unroll 8
  for (int n = 0; n < C * C / T::kThreads; ++n) {
    const int i = tid + n * T::kThreads, s = i / C, t = i % C;  // PT[s][t] = P[t][s]
    rec[T::kPT + i] = sm.p[t][s];
  }
  if (tid == 0) rec[T::kGc] = sm.G[C - 1];
}

template <class S>
__global__ void __launch_bounds__(GdnChunkedShape<S>::kThreads, 1) gdn_chunk_scan_kernel(const __grid_constant__ GdnChunkedParams p) {
  using T = GdnChunkedShape<S>;
  constexpr int C = T::C, Kd = T::kKd, Vd = T::kVd, N = T::kCols;
  constexpr int kCP = T::kColPitch, kTP = T::kTokPitch, kKP = T::kKeyPitch;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  GdnScanSmem<S>& sm = *reinterpret_cast<GdnScanSmem<S>*>(smem_raw);
  const int h = blockIdx.y, col0 = blockIdx.x * N;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, c = lane % 4;
  const int chunks = p.pos0 % C + p.tokens <= C ? 1 : 1 + (p.tokens - (C - p.pos0 % C) + C - 1) / C;
  const float* ws = p.workspace + int64_t(h) * T::kRecord;
  const int64_t chunk_stride = int64_t(S::kVHeads) * T::kRecord;
  float* state = p.state + int64_t(h) * Kd * Vd + col0;
  // This warp's tiles: rows m0.. and columns n0, n0 + 8 of U' and O; rows d0.., columns s0.. of the state.
  const int m0 = 16 * (warp / 2), n0 = 16 * (warp % 2);
  const int d0 = 16 * (warp / T::kWarpsPerRowTile), s0 = 8 * T::kStateTiles * (warp % T::kWarpsPerRowTile);

  // Chunk j's operands in three groups, each issued as soon as the previous chunk is done with its
  // buffers, so each has two products' time to land: X = Wᵀ and U (step a; U double-buffered), Q =
  // (G ⊙ Q)ᵀ and P (step b), K = K ⊙ G_C/G (step c).
  const auto issue_x = [&](int j) {
    if (j < chunks) {
      const float* rec = ws + j * chunk_stride;
      cp_async_rows<T::kThreads, Kd, C, kTP, C>(&sm.wt[0][0], rec + T::kWt, tid);
      cp_async_rows<T::kThreads, C, N, kCP, Vd>(&sm.u[j % 2][0][0], rec + T::kU + col0, tid);
    }
    cp_async_commit();
  };
  const auto issue_q = [&](int j) {
    if (j < chunks) {
      const float* rec = ws + j * chunk_stride;
      cp_async_rows<T::kThreads, Kd, C, kTP, C>(&sm.qgt[0][0], rec + T::kQgT, tid);
      cp_async_rows<T::kThreads, C, C, kTP, C>(&sm.pt[0][0], rec + T::kPT, tid);
    }
    cp_async_commit();
  };
  const auto issue_k = [&](int j) {
    if (j < chunks) cp_async_rows<T::kThreads, C, Kd, kKP, Kd>(&sm.kend[0][0], ws + j * chunk_stride + T::kKend, tid);
    cp_async_commit();
  };
  issue_x(0);
  issue_q(0);
  issue_k(0);
  cp_async_rows<T::kThreads, Kd, N, kCP, Vd>(&sm.s[0][0], state, tid);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  for (int j = 0; j < chunks; ++j) {
    const ChunkSpan span = chunk_span(j, p.pos0, p.tokens);
    float (*u)[kCP] = sm.u[j % 2];
    // Step a: U' = U - W S.
    {
      float acc[2][4] = {};
#pragma unroll 4
      for (int k0 = 0; k0 < Kd; k0 += 8) {
        const FragA a = frag_a_t<kTP>(&sm.wt[0][0], m0, k0, g, c);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) mma_3xtf32(acc[nt], a, frag_b<kCP>(&sm.s[0][0], k0, n0 + 8 * nt, g, c));
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float2& ut = *reinterpret_cast<float2*>(&u[m0 + g + 8 * half][n0 + 8 * nt + 2 * c]);
          ut = make_float2(ut.x - acc[nt][2 * half], ut.y - acc[nt][2 * half + 1]);
        }
    }
    __syncthreads();
    issue_x(j + 1);      // Wᵀ is free now; U goes to the other buffer
    cp_async_wait<2>();  // Q of chunk j has landed (K of j and X of j + 1 may still fly)
    __syncthreads();
    // Step b: O = (G ⊙ Q) S + P U' (P is zero above the diagonal: k runs to the tile's last row).
    {
      float acc[2][4] = {};
#pragma unroll 4
      for (int k0 = 0; k0 < Kd; k0 += 8) {
        const FragA a = frag_a_t<kTP>(&sm.qgt[0][0], m0, k0, g, c);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) mma_3xtf32(acc[nt], a, frag_b<kCP>(&sm.s[0][0], k0, n0 + 8 * nt, g, c));
      }
      for (int k0 = 0; k0 < m0 + 16; k0 += 8) {
        const FragA a = frag_a_t<kTP>(&sm.pt[0][0], m0, k0, g, c);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) mma_3xtf32(acc[nt], a, frag_b<kCP>(&u[0][0], k0, n0 + 8 * nt, g, c));
      }
      float* o = p.workspace + T::output_offset(p.tokens);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int t = m0 + g + 8 * half;
        if (t < span.count)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
            *reinterpret_cast<float2*>(o + ((int64_t(span.start) + t) * S::kVHeads + h) * Vd + col0 + n0 + 8 * nt + 2 * c) =
                make_float2(acc[nt][2 * half], acc[nt][2 * half + 1]);
      }
    }
    __syncthreads();
    issue_q(j + 1);      // (G ⊙ Q)ᵀ and P are free
    cp_async_wait<2>();  // K of chunk j has landed
    __syncthreads();
    // Step c: S <- G_C S + (K ⊙ G_C/G)ᵀ U', written after every read of S.
    float acc[T::kStateTiles][4] = {};
#pragma unroll 2
    for (int k0 = 0; k0 < C; k0 += 8) {
      const FragA a = frag_a_t<kKP>(&sm.kend[0][0], d0, k0, g, c);  // A[d][t] = kend[t][d]
#pragma unroll
      for (int nt = 0; nt < T::kStateTiles; ++nt) mma_3xtf32(acc[nt], a, frag_b<kCP>(&u[0][0], k0, s0 + 8 * nt, g, c));
    }
    const float gC = ws[j * chunk_stride + T::kGc];
    __syncthreads();
    const int32_t snap = p.capture_at ? p.capture_at[j] : -1;
    float* snapshot = snap >= 0 ? p.snapshot_state + int64_t(snap) * p.snapshot_stride + int64_t(h) * Kd * Vd + col0 : nullptr;
#pragma unroll
    for (int nt = 0; nt < T::kStateTiles; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int d = d0 + g + 8 * half, col = s0 + 8 * nt + 2 * c;
        float2& st = *reinterpret_cast<float2*>(&sm.s[d][col]);
        st = make_float2(gC * st.x + acc[nt][2 * half], gC * st.y + acc[nt][2 * half + 1]);
        if (snapshot) *reinterpret_cast<float2*>(snapshot + int64_t(d) * Vd + col) = st;
        if (j == chunks - 1) *reinterpret_cast<float2*>(state + int64_t(d) * Vd + col) = st;
      }
    issue_k(j + 1);      // K ⊙ G_C/G is free: every thread passed the sync above
    cp_async_wait<2>();  // X of chunk j + 1 has landed
    __syncthreads();
  }
  cp_async_wait<0>();
}

template <class S>
__global__ void __launch_bounds__(256) gdn_chunk_norm_kernel(const __grid_constant__ GdnChunkedParams p) {
  using T = GdnChunkedShape<S>;
  constexpr int Vd = T::kVd;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= p.tokens * S::kVHeads) return;
  const int64_t tok = warp / S::kVHeads;
  const int h = warp % S::kVHeads;
  const float* o = p.workspace + T::output_offset(p.tokens) + int64_t(warp) * Vd;
  float x[Vd / 32];
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < Vd / 32; ++c) x[c] = o[c * 32 + lane], ss += x[c] * x[c];
  const float inv = 1.0f / sqrtf(warp_sum(ss) / float(Vd) + p.eps);
#pragma unroll
  for (int c = 0; c < Vd / 32; ++c) {
    const int jv = c * 32 + lane;
    const int64_t at = tok * S::kValueDim + h * Vd + jv;
    const float z = __bfloat162float(p.z[at]);
    p.out[at] = __float2bfloat16_rn(__bfloat162float(p.norm_w[jv]) * (x[c] * inv) * (z / (1.0f + expf(-z))));
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// The three kernels one at a time (a check times them apart); gdn_chunked runs all three in order.
template <class S>
void gdn_chunk_prepare(const GdnChunkedParams& p, cudaStream_t stream) {
  using T = GdnChunkedShape<S>;
  CHECK(p.tokens >= 1 && p.pos0 >= 0, "gdn chunked: needs at least one token at a position >= 0");
  CHECK(tiling::gdn_chunked_workspace_floats(S::kKHeads, S::kVHeads, T::kKd, T::kVd, p.tokens) <= p.workspace_floats,
        "gdn chunked: the workspace is smaller than the piece needs");
  constexpr int kSmem = sizeof(GdnPrepareSmem<S>);
  raise_smem_limit_once<gdn_chunk_prepare_kernel<S>>(kSmem);
  const int first = T::C - p.pos0 % T::C;
  const int chunks = p.tokens <= first ? 1 : 1 + (p.tokens - first + T::C - 1) / T::C;
  gdn_chunk_prepare_kernel<S><<<dim3(chunks, S::kVHeads), T::kThreads, kSmem, stream>>>(p);
  CUDA_CHECK(cudaGetLastError());
}

template <class S>
void gdn_chunk_scan(const GdnChunkedParams& p, cudaStream_t stream) {
  using T = GdnChunkedShape<S>;
  CHECK(p.capture_at == nullptr || p.snapshot_state != nullptr, "gdn chunked: captures need the snapshot state");
  constexpr int kSmem = sizeof(GdnScanSmem<S>);
  raise_smem_limit_once<gdn_chunk_scan_kernel<S>>(kSmem);
  gdn_chunk_scan_kernel<S><<<dim3(T::kSplit, S::kVHeads), T::kThreads, kSmem, stream>>>(p);
  CUDA_CHECK(cudaGetLastError());
}

template <class S>
void gdn_chunk_norm(const GdnChunkedParams& p, cudaStream_t stream) {
  const int warps = p.tokens * S::kVHeads;
  gdn_chunk_norm_kernel<S><<<(warps + 7) / 8, 256, 0, stream>>>(p);
  CUDA_CHECK(cudaGetLastError());
}

// One stream's piece: p.tokens (>= 1) tokens from absolute position p.pos0, state in and out at p.state.
template <class S>
void gdn_chunked(const GdnChunkedParams& p, cudaStream_t stream) {
  gdn_chunk_prepare<S>(p, stream);
  gdn_chunk_scan<S>(p, stream);
  gdn_chunk_norm<S>(p, stream);
}

}  // namespace rocket::cuda
