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
//     memory for the whole piece and runs the three products per chunk as small fp32 GEMMs; the next
//     chunk's operands stream in with cp.async behind the current chunk's products. It writes the state
//     after chunk j to snapshot slot capture_at[j] (when >= 0) and the final state back.
//  3. norm: one warp per (token, value head): the gated norm needs sums over all Vd, which kernel 2
//     splits over blocks.
//
// FP32 CUDA-core math throughout: the products feed a state carried over thousands of tokens, and
// tf32 tensor cores would round operands to 11 bits.
//
// State layout: as gdn.cuh, fp32 [Hv][Kd][Vd] for this layer of the stream's slot (the caller passes the
// pointer); a snapshot slot holds the same layer at snapshot_state + slot * snapshot_stride.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/gdn.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/reduce.cuh"
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
  // Scan products: thread (ty, tx) of 16 x 16 owns rows 4ty..4ty+3 of the C x kCols outputs (U', O) and
  // rows ty*kSRows.. of the Kd x kCols state, columns 2tx, 2tx+1.
  static constexpr int kSRows = kKd / 16;
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
  static_assert(C == 64 && kCols == 32 && kThreads == 256, "the scan's 16 x 16 thread grid covers 64 x 32 outputs");
  static_assert(kVd % kCols == 0, "value columns split evenly over scan blocks");
  static_assert(kKd % 64 == 0 || kKd == 32, "state rows per scan thread are a float2 or float4 multiple");
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
};

template <class S>
struct GdnScanSmem {
  using T = GdnChunkedShape<S>;
  float s[T::kKd][T::kCols];     // this block's state slice
  float wt[T::kKd][T::C];        // Wᵀ
  float qgt[T::kKd][T::C];       // (G ⊙ Q)ᵀ
  float kend[T::C][T::kKd];      // K ⊙ G_C/G
  float pt[T::C][T::C];          // masked (Q Kᵀ ⊙ G_t/G_i)ᵀ
  float u[2][T::C][T::kCols];    // U, then U' in place; two chunks in flight
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

__device__ __forceinline__ void cp_async16(void* smem, const void* global) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(global));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending)); }

// n floats (a multiple of 4, 16-byte aligned both sides) from global to shared memory by the whole block.
template <int kThreads>
__device__ __forceinline__ void cp_async_floats(float* smem, const float* global, int n, int tid) {
  for (int i = 4 * tid; i < n; i += 4 * kThreads) cp_async16(smem + i, global + i);
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
  if (tid < C) sm.G[tid] = expf(float(sm.gc[tid]));

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

  // (G ⊙ Q)ᵀ, K ⊙ G_C/G, the transposed masked P, and G_C.
  for (int i = tid; i < Kd * C; i += T::kThreads) {
    const int d = i / C, t = i % C;
    rec[T::kQgT + i] = sm.qn[t][d] * sm.G[t];
  }
  for (int i = tid; i < C * Kd; i += T::kThreads) {
    const int t = i / Kd, d = i % Kd;
    rec[T::kKend + i] = sm.kn[t][d] * expf(float(sm.gc[C - 1] - sm.gc[t]));
  }
  for (int i = tid; i < C * C; i += T::kThreads) {
    const int s = i / C, t = i % C;  // PT[s][t] = P[t][s]
    rec[T::kPT + i] = sm.p[t][s];
  }
  if (tid == 0) rec[T::kGc] = sm.G[C - 1];
}

template <class S>
__global__ void __launch_bounds__(GdnChunkedShape<S>::kThreads, 1) gdn_chunk_scan_kernel(const __grid_constant__ GdnChunkedParams p) {
  using T = GdnChunkedShape<S>;
  constexpr int C = T::C, Kd = T::kKd, Vd = T::kVd, N = T::kCols, R = T::kSRows;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  GdnScanSmem<S>& sm = *reinterpret_cast<GdnScanSmem<S>*>(smem_raw);
  const int h = blockIdx.y, col0 = blockIdx.x * N;
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int chunks = p.pos0 % C + p.tokens <= C ? 1 : 1 + (p.tokens - (C - p.pos0 % C) + C - 1) / C;
  const float* ws = p.workspace + int64_t(h) * T::kRecord;
  const int64_t chunk_stride = int64_t(S::kVHeads) * T::kRecord;
  float* state = p.state + int64_t(h) * Kd * Vd + col0;

  // Chunk j's operands in two groups: X = Wᵀ and U (step a), Y = (G ⊙ Q)ᵀ, P and K ⊙ G_C/G (steps b, c).
  const auto issue_x = [&](int j) {
    if (j < chunks) {
      const float* rec = ws + j * chunk_stride;
      cp_async_floats<T::kThreads>(&sm.wt[0][0], rec + T::kWt, Kd * C, tid);
      for (int i = tid; i < C * N / 4; i += T::kThreads)
        cp_async16(&sm.u[j % 2][0][0] + 4 * i, rec + T::kU + int64_t(i / (N / 4)) * Vd + col0 + 4 * (i % (N / 4)));
    }
    cp_async_commit();
  };
  const auto issue_y = [&](int j) {
    if (j < chunks) {
      const float* rec = ws + j * chunk_stride;
      cp_async_floats<T::kThreads>(&sm.qgt[0][0], rec + T::kQgT, Kd * C, tid);
      cp_async_floats<T::kThreads>(&sm.kend[0][0], rec + T::kKend, C * Kd, tid);
      cp_async_floats<T::kThreads>(&sm.pt[0][0], rec + T::kPT, C * C, tid);
    }
    cp_async_commit();
  };
  issue_x(0);
  issue_y(0);
  for (int i = tid; i < Kd * N / 4; i += T::kThreads)
    cp_async16(&sm.s[0][0] + 4 * i, state + int64_t(i / (N / 4)) * Vd + 4 * (i % (N / 4)));
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  for (int j = 0; j < chunks; ++j) {
    const ChunkSpan span = chunk_span(j, p.pos0, p.tokens);
    float (*u)[N] = sm.u[j % 2];
    // Step a: U' = U - W S (rows 4ty.., columns 2tx, 2tx+1).
    {
      float acc[4][2] = {};
#pragma unroll 4
      for (int d = 0; d < Kd; ++d) {
        const float4 w = *reinterpret_cast<const float4*>(&sm.wt[d][4 * ty]);
        const float2 s = *reinterpret_cast<const float2*>(&sm.s[d][2 * tx]);
        acc[0][0] += w.x * s.x, acc[0][1] += w.x * s.y, acc[1][0] += w.y * s.x, acc[1][1] += w.y * s.y;
        acc[2][0] += w.z * s.x, acc[2][1] += w.z * s.y, acc[3][0] += w.w * s.x, acc[3][1] += w.w * s.y;
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        float2& ut = *reinterpret_cast<float2*>(&u[4 * ty + r][2 * tx]);
        ut = make_float2(ut.x - acc[r][0], ut.y - acc[r][1]);
      }
    }
    __syncthreads();
    issue_x(j + 1);     // Wᵀ is free now; U goes to the other buffer
    cp_async_wait<1>();  // Y of chunk j has landed (X of chunk j + 1 may still fly)
    __syncthreads();
    // Step b: O = (G ⊙ Q) S + P U' (P is zero above the diagonal: i runs to the thread's last row).
    {
      float acc[4][2] = {};
#pragma unroll 4
      for (int d = 0; d < Kd; ++d) {
        const float4 q = *reinterpret_cast<const float4*>(&sm.qgt[d][4 * ty]);
        const float2 s = *reinterpret_cast<const float2*>(&sm.s[d][2 * tx]);
        acc[0][0] += q.x * s.x, acc[0][1] += q.x * s.y, acc[1][0] += q.y * s.x, acc[1][1] += q.y * s.y;
        acc[2][0] += q.z * s.x, acc[2][1] += q.z * s.y, acc[3][0] += q.w * s.x, acc[3][1] += q.w * s.y;
      }
      for (int i = 0; i < 4 * ty + 4; ++i) {
        const float4 pp = *reinterpret_cast<const float4*>(&sm.pt[i][4 * ty]);
        const float2 du = *reinterpret_cast<const float2*>(&u[i][2 * tx]);
        acc[0][0] += pp.x * du.x, acc[0][1] += pp.x * du.y, acc[1][0] += pp.y * du.x, acc[1][1] += pp.y * du.y;
        acc[2][0] += pp.z * du.x, acc[2][1] += pp.z * du.y, acc[3][0] += pp.w * du.x, acc[3][1] += pp.w * du.y;
      }
      float* o = p.workspace + T::output_offset(p.tokens);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int t = 4 * ty + r;
        if (t < span.count)
          *reinterpret_cast<float2*>(o + ((int64_t(span.start) + t) * S::kVHeads + h) * Vd + col0 + 2 * tx) =
              make_float2(acc[r][0], acc[r][1]);
      }
    }
    // Step c: S <- G_C S + (K ⊙ G_C/G)ᵀ U' (rows ty*R.., columns 2tx, 2tx+1), written after every read of S.
    float acc[R][2] = {};
#pragma unroll 2
    for (int i = 0; i < C; ++i) {
      const float2 du = *reinterpret_cast<const float2*>(&u[i][2 * tx]);
      float kv[R];
      if constexpr (R % 4 == 0) {
#pragma unroll
        for (int r = 0; r < R; r += 4) *reinterpret_cast<float4*>(&kv[r]) = *reinterpret_cast<const float4*>(&sm.kend[i][ty * R + r]);
      } else {
#pragma unroll
        for (int r = 0; r < R; r += 2) *reinterpret_cast<float2*>(&kv[r]) = *reinterpret_cast<const float2*>(&sm.kend[i][ty * R + r]);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][0] += kv[r] * du.x, acc[r][1] += kv[r] * du.y;
    }
    const float gC = ws[j * chunk_stride + T::kGc];
    __syncthreads();
    const int32_t snap = p.capture_at ? p.capture_at[j] : -1;
    float* snapshot = snap >= 0 ? p.snapshot_state + int64_t(snap) * p.snapshot_stride + int64_t(h) * Kd * Vd + col0 : nullptr;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int d = ty * R + r;
      float2& s = *reinterpret_cast<float2*>(&sm.s[d][2 * tx]);
      s = make_float2(gC * s.x + acc[r][0], gC * s.y + acc[r][1]);
      if (snapshot) *reinterpret_cast<float2*>(snapshot + int64_t(d) * Vd + 2 * tx) = s;
      if (j == chunks - 1) *reinterpret_cast<float2*>(state + int64_t(d) * Vd + 2 * tx) = s;
    }
    issue_y(j + 1);      // (G ⊙ Q)ᵀ, P, K ⊙ G_C/G are free: every thread passed the sync above
    cp_async_wait<1>();  // X of chunk j + 1 has landed
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
  static const bool attribute_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(gdn_chunk_prepare_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)attribute_set;
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
  static const bool attribute_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(gdn_chunk_scan_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)attribute_set;
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
