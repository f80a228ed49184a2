// Gated full attention over the paged KV cache on the H200, one new token per row (decode): for each
// of the kRows rows of a bucket (a stream with its own position and page table) it
//   1. normalises and rotates the row's query heads (q_norm, partial RoPE at its rotary position; rope.cuh),
//   2. normalises and rotates the row's key, and appends key and value at the row's position,
//   3. computes softmax(q·kᵀ/√hd)·v over positions 0..pos with GQA, and
//   4. multiplies by sigmoid(gate) and writes bf16 [rows][heads·hd] for o_proj.
//
// Split-K (flash-decoding): the context of each (row, KV head) is cut into kSplits ranges, one block
// each, so one stream at 8192 tokens still fills the H200's SMs; a block reads every KV token of its
// range once for all kGroup query heads that share the KV head, and leaves an unnormalised partial
// (max, sum, Σ p·v) in a workspace. A second kernel merges the partials, normalises and gates.
//
// Inner loop: each lane owns 8 dims of a head (one 16-byte load of K and of V per token), holds the
// group's query for those dims in registers (fp32), and folds the kGroup partial dot products across
// the lanes of a token so each lane ends with one head's score (fold_heads). Scores are in log2 units
// (the softmax scale · log2 e is folded into q), so exponentials are exp2f.
// NOTE: neither twice the tokens in flight per lane (kSteps 8), twice the splits, nor scores and P·V
// on the tensor cores (~8x fewer instructions per token; wip/attention-mma) made the step faster, at
// 512 or 8192 tokens (h200-a3b.md History 05:45Z-06:34Z on 2026-11-30). Per ncu this kernel is
// issue-bound at two 4-warp blocks per SM; the tensor-core form lost to shared-memory bank conflicts.
// A conflict-free layout for it was written but never measured, and its branch did not survive
// (h200-a3b.md History 06:34Z says what it was).
//
// KV cache: a cache page holds kPageTokens tokens; a layer's K (and V) plan page is
// [kPageTokens][kv_heads][hd] bf16 (KvLayout, src/cache/layout.h). The launch sees the layer's K and V page
// of cache page 0 and the stride between cache pages; a row's page table maps logical page j to a
// cache page index.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"
#include "kernels/cuda/primitives/reduce.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/tiling/attention.h"

namespace rocket::cuda {

// The attention shapes of one chemistry and plan (engine.h: kHeads, kKvHeads, kHeadDim, kRotaryDim,
// kKvPageTokens).
template <int kHeads_, int kKvHeads_, int kHeadDim_, int kRotaryDim_, int kPageTokens_>
struct AttentionShape {
  static constexpr int kHeads = kHeads_, kKvHeads = kKvHeads_, kHeadDim = kHeadDim_, kRotaryDim = kRotaryDim_;
  static constexpr int kPageTokens = kPageTokens_;
  static_assert(kHeads % kKvHeads == 0, "GQA needs heads % kv_heads == 0");
};

// Tiles of the split kernel for kRows rows per launch (kernels/tiling/attention.h).
template <class S, int kRows>
struct AttentionTiles {
  static constexpr tiling::AttentionTiling kTiling = tiling::attention_tiling(S::kHeads, S::kKvHeads, S::kHeadDim, kRows);
  static constexpr tiling::KernelTiles kTiles = tiling::attention_decode_tiles(S::kHeads, S::kKvHeads, S::kHeadDim, kRows);
  static constexpr int kGroup = kTiling.group;                     // query heads sharing one KV head
  static constexpr int kLanesPerToken = kTiling.lanes_per_token;  // 8 dims (16 bytes of bf16) per lane
  static constexpr int kTokensPerStep = kTiling.tokens_per_step;
  static constexpr int kSteps = kTiling.steps;  // tokens per lane per chunk: 4 K and 4 V loads in flight
  static constexpr int kChunk = kTiling.chunk;  // tokens a warp takes at a time
  static constexpr int kWarps = kTiling.warps;
  static constexpr int kBlockTokens = kTiling.block_tokens;
  static constexpr int kMinSplitTokens = kTiling.min_split_tokens;
  static constexpr int kSplits = kTiling.splits;
  // Workspace: unnormalised outputs [rows][heads][splits][hd], then (max, sum) [rows][heads][splits].
  static constexpr int64_t kPartialFloats = kTiling.partial_floats;

  static_assert(S::kHeadDim % 32 == 0 && S::kHeadDim <= 256, "a token's head spans 1 to 32 lanes of 8 dims");
  static_assert((kGroup & (kGroup - 1)) == 0 && kGroup <= kLanesPerToken, "fold_heads needs a power-of-two group <= lanes per token");
  static constexpr int kSmemBytes = kTiling.smem_bytes;
  static_assert(kSmemBytes <= 48 * 1024, "split kernel: static shared memory exceeds 48 KiB");
};

// One params struct for the split and combine kernels of decode and of prefill (attention_prefill.cuh),
// which differ only in how a row finds its position and page table (kChunked below).
template <class S>
struct AttentionParams {
  const __nv_bfloat16* qg = nullptr;      // [rows][heads][2][hd]: q_proj output, query then gate per head
  const __nv_bfloat16* k = nullptr;       // [rows][kv_heads][hd]: k_proj output (before k_norm, RoPE)
  const __nv_bfloat16* v = nullptr;       // [rows][kv_heads][hd]: v_proj output
  const __nv_bfloat16* q_norm = nullptr;  // [hd] zero-centred gain
  const __nv_bfloat16* k_norm = nullptr;  // [hd] zero-centred gain
  __nv_bfloat16* k_cache = nullptr;       // this layer's K plan page of cache page 0
  __nv_bfloat16* v_cache = nullptr;       // this layer's V plan page of cache page 0
  int64_t page_stride = 0;                // elements from one cache page to the next
  const int32_t* page_table = nullptr;    // decode: [slots][table_width]; prefill: [table_width]
  int table_width = 0;
  const int32_t* slots = nullptr;         // decode: [rows], the slot whose page table row r reads
  const int32_t* pos = nullptr;           // decode: [rows], each row's position; prefill: [1], the chunk's first
  const RopePosition* rope_at = nullptr;  // [rows]: each row's rotary position (rope.cuh; a text row's is its pos)
  float* partial = nullptr;               // AttentionTiles::kPartialFloats
  __nv_bfloat16* out = nullptr;           // [rows][heads·hd]
  float eps = 0.0f;                       // q_norm / k_norm epsilon
  RopeTable<S::kRotaryDim> rope;
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

namespace attention_detail {

// Tokens per split for a context of ctx tokens: a multiple of the block pass, at least kMinSplitTokens.
template <class T>
__device__ __forceinline__ int split_tokens(int ctx) {
  const int per = (ctx + T::kSplits - 1) / T::kSplits;
  const int len = (per + T::kBlockTokens - 1) / T::kBlockTokens * T::kBlockTokens;
  return len > T::kMinSplitTokens ? len : T::kMinSplitTokens;
}

template <bool kChunked>
__device__ __forceinline__ int row_position(const int32_t* pos, int row) {
  return kChunked ? __ldg(pos) + row : __ldg(pos + row);
}

__device__ __forceinline__ void bf16x8_to_float(const uint4& u, float f[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// v[0..kN) are one lane's partial dot products for kN heads; the 2·kOffset lanes of its token (lane
// ids equal above bit kOffset) hold the other dims. Each halving step swaps half of the heads with
// the partner lane, so after log2(kN) steps, then plain sums over the remaining offsets, v[0] holds
// the full score of head (lane % L) / (L / kN), L = 2·kOffset: kN − 1 + log2(L / kN) shuffles instead
// of kN · log2(L) (a3b: 9 instead of 40 per token).
template <int kN, int kOffset>
__device__ __forceinline__ void fold_heads(float* v, int lane) {
  if constexpr (kOffset >= 1) {
    if constexpr (kN > 1) {
      const bool upper = lane & kOffset;
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) {
        const float send = upper ? v[i] : v[i + kN / 2];
        const float keep = upper ? v[i + kN / 2] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
      }
      fold_heads<kN / 2, kOffset / 2>(v, lane);
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], kOffset);
      fold_heads<1, kOffset / 2>(v, lane);
    }
  }
}

}  // namespace attention_detail

// Grid (kSplits, kv_heads, kRows), kWarps warps. kChunked (prefill): row r is the chunk's token r at
// position pos[0] + r, every row shares the one page table, and the chunk's K and V are already in
// the cache (attention_prefill.cuh appends them first). Otherwise (decode) the block whose range holds
// the row's position appends the row's K and V before reading: __syncthreads makes those global
// stores visible to the block's own loads (which go through L2, never the non-coherent path).
template <class S, int kRows, bool kChunked>
__global__ void __launch_bounds__(AttentionTiles<S, kRows>::kWarps * 32, 2)
    attention_split_kernel(const __grid_constant__ AttentionParams<S> p) {
  using T = AttentionTiles<S, kRows>;
  constexpr int kG = T::kGroup, kHd = S::kHeadDim, kL = T::kLanesPerToken, kTps = T::kTokensPerStep;
  const int split = blockIdx.x, kvh = blockIdx.y, row = blockIdx.z;
  // Positions, slots and page tables are step inputs (dependent_launch.cuh, rule 1): read before the
  // chain's wait.
  const int pos = attention_detail::row_position<kChunked>(p.pos, row);
  const int ctx = pos + 1;
  const int len = attention_detail::split_tokens<T>(ctx);
  const int t0 = split * len;
  const int t1 = min(ctx, t0 + len);
  const int32_t* table = p.page_table + (kChunked ? 0 : int64_t(__ldg(p.slots + row)) * p.table_width);

  __shared__ __align__(16) float qs[kG][kHd];
  __shared__ __align__(16) float ks[kHd];
  __shared__ __align__(16) float ps[T::kWarps][T::kSteps][kTps][kG];  // a chunk's probabilities
  __shared__ float alpha_s[T::kWarps][kG];                             // a chunk's rescale factors
  __shared__ __align__(16) float wacc[T::kWarps][kG][kHd];            // per-warp results
  __shared__ float wm[T::kWarps][kG], wl[T::kWarps][kG];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int d0 = (lane % kL) * 8;  // this lane's dims
  const int tok_in_step = lane / kL;
  const int head = (lane % kL) / (kL / kG);            // the head whose score this lane ends with
  const bool writer = lane % (kL / kG) == 0;           // one lane per (token, head) publishes it
  const int64_t kv_lane = int64_t(kvh) * kHd + d0;
  // Token u of the lane's share of the chunk at c; past the range it re-reads the range's last token
  // (always mapped), whose score is masked.
  auto kv_offset = [&](int c, int u) {
    const int t = min(c + u * kTps + tok_in_step, t1 - 1);
    return int64_t(__ldg(table + t / S::kPageTokens)) * p.page_stride + int64_t(t % S::kPageTokens) * S::kKvHeads * kHd + kv_lane;
  };
  auto load = [&](const __nv_bfloat16* cache, int c, uint4 (&r)[T::kSteps]) {
#pragma unroll
    for (int u = 0; u < T::kSteps; ++u) r[u] = __ldcg(reinterpret_cast<const uint4*>(cache + kv_offset(c, u)));
  };
  // A decode warp's first chunk, when it lies below the row's position, was written in earlier steps
  // by this kernel alone (rule 1): its loads go out before the chain's wait, so the wait and the query
  // setup below hide their latency. (A prefill chunk's own K and V are appended by the kernel before.)
  uint4 kr[T::kSteps], vr[T::kSteps];
  int c0 = t0 + warp * T::kChunk;
  const bool early = !kChunked && c0 + T::kChunk <= pos;
  if (early) {
    load(p.k_cache, c0, kr);
    load(p.v_cache, c0, vr);
  }
  enter_chain();
  if (t0 >= ctx) return;  // this row's context needs fewer splits; the combine kernel skips them

  // HF: scaling = head_dim ** -0.5 on fp32 scores; folded into q with log2 e for exp2f.
  const float q_scale = float(1.0 / sqrt(double(kHd))) * 1.4426950408889634f;
  // Every query head of this warp is loaded before any is normalised (and before the append waits for
  // the key): one round trip for all of them.
  constexpr int kHeadsPerWarp = (kG + T::kWarps - 1) / T::kWarps;
  HeadOperands<kHd> qin[kHeadsPerWarp];
#pragma unroll
  for (int j = 0; j < kHeadsPerWarp; ++j) {
    const int g = warp + j * T::kWarps;
    if (g < kG) qin[j] = load_head<kHd>(p.qg + (int64_t(row) * S::kHeads + kvh * kG + g) * 2 * kHd, p.q_norm);
  }
  if (!kChunked && pos < t1 && warp < 2) {
    const int64_t src = (int64_t(row) * S::kKvHeads + kvh) * kHd;
    const int64_t dst = int64_t(__ldg(table + pos / S::kPageTokens)) * p.page_stride +
                        (int64_t(pos % S::kPageTokens) * S::kKvHeads + kvh) * kHd;
    if (warp == 0) {
      norm_rope_head<kHd, S::kRotaryDim>(load_head<kHd>(p.k + src, p.k_norm), p.rope, p.rope_at[row], p.eps, 1.0f, ks);
      for (int d = lane; d < kHd; d += 32) p.k_cache[dst + d] = __float2bfloat16_rn(ks[d]);
    } else {
      for (int d = lane; d < kHd; d += 32) p.v_cache[dst + d] = p.v[src + d];
    }
  }
#pragma unroll
  for (int j = 0; j < kHeadsPerWarp; ++j) {
    const int g = warp + j * T::kWarps;
    if (g < kG) norm_rope_head<kHd, S::kRotaryDim>(qin[j], p.rope, p.rope_at[row], p.eps, q_scale, qs[g]);
  }
  __syncthreads();

  float q[kG][8], acc[kG][8];
#pragma unroll
  for (int g = 0; g < kG; ++g)
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      q[g][i] = qs[g][d0 + i];
      acc[g][i] = 0.0f;
    }
  float m = -INFINITY, l = 0.0f;  // running max (log2 units) and sum for `head` over this lane's tokens

  // Software pipeline without extra registers: the next chunk's K is loaded once this chunk's scores
  // are taken (in flight during softmax and P·V), its V once P·V is done (in flight during its scores).
  if (!early && c0 < t1) {
    load(p.k_cache, c0, kr);
    load(p.v_cache, c0, vr);
  }
  for (; c0 < t1; c0 += T::kBlockTokens) {
    const int c_next = c0 + T::kBlockTokens;
    float s[T::kSteps];
    float chunk_max = -INFINITY;
#pragma unroll
    for (int u = 0; u < T::kSteps; ++u) {
      float kf[8], part[kG];
      attention_detail::bf16x8_to_float(kr[u], kf);
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) a += q[g][i] * kf[i];
        part[g] = a;
      }
      attention_detail::fold_heads<kG, kL / 2>(part, lane);
      s[u] = c0 + u * kTps + tok_in_step < t1 ? part[0] : -INFINITY;
      chunk_max = fmaxf(chunk_max, s[u]);
    }
    if (c_next < t1) load(p.k_cache, c_next, kr);
#pragma unroll
    for (int o = kL; o < 32; o <<= 1) chunk_max = fmaxf(chunk_max, __shfl_xor_sync(0xffffffffu, chunk_max, o));
    const float m_new = fmaxf(m, chunk_max);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a fully masked chunk: every exp2f is 0
    const float alpha = exp2f(m - m_use);
    m = m_new;
    l *= alpha;
#pragma unroll
    for (int u = 0; u < T::kSteps; ++u) {
      s[u] = exp2f(s[u] - m_use);
      l += s[u];
      if (writer) ps[warp][u][tok_in_step][head] = s[u];
    }
    if (writer && tok_in_step == 0) alpha_s[warp][head] = alpha;
    __syncwarp();
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      const float a = alpha_s[warp][g];
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] *= a;
    }
#pragma unroll
    for (int u = 0; u < T::kSteps; ++u) {
      float vf[8];
      attention_detail::bf16x8_to_float(vr[u], vf);
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        const float pg = ps[warp][u][tok_in_step][g];
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] += pg * vf[i];
      }
    }
    if (c_next < t1) load(p.v_cache, c_next, vr);
    __syncwarp();  // ps and alpha_s are rewritten by the next chunk
  }

  // Sum over the tokens of a step (lanes kL apart share dims and heads' maxima).
#pragma unroll
  for (int o = kL; o < 32; o <<= 1) {
    l += __shfl_xor_sync(0xffffffffu, l, o);
#pragma unroll
    for (int g = 0; g < kG; ++g)
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] += __shfl_xor_sync(0xffffffffu, acc[g][i], o);
  }
  if (lane < kL) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      *reinterpret_cast<float4*>(&wacc[warp][g][d0]) = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
      *reinterpret_cast<float4*>(&wacc[warp][g][d0 + 4]) = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
    }
    if (writer) {
      wm[warp][head] = m;
      wl[warp][head] = l;
    }
  }
  __syncthreads();

  // Merge the warps. Warp 0 always saw the range's first token, so the block maximum is finite.
  const int64_t slot0 = (int64_t(row) * S::kHeads + kvh * kG) * T::kSplits + split;  // (row, first head, split)
  float* o_part = p.partial;
  float2* ml_part = reinterpret_cast<float2*>(p.partial + int64_t(kRows) * S::kHeads * T::kSplits * kHd);
  for (int i = threadIdx.x; i < kG * kHd; i += T::kWarps * 32) {
    const int g = i / kHd, d = i % kHd;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < T::kWarps; ++w) mx = fmaxf(mx, wm[w][g]);
    float o = 0.0f, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < T::kWarps; ++w) {
      const float f = exp2f(wm[w][g] - mx);
      o += f * wacc[w][g][d];
      sum += f * wl[w][g];
    }
    const int64_t slot = slot0 + int64_t(g) * T::kSplits;
    o_part[slot * kHd + d] = o;
    if (d == 0) ml_part[slot] = make_float2(mx, sum);
  }
}

// Grid (heads, kRows), 256 threads: merges the active splits of one (row, head), normalises, applies
// sigmoid(gate) (as torch: 1 / (1 + exp(-x))) and rounds to bf16. Threads take 4 dims each and the
// splits round-robin in kParts groups, so a thread has at most kSplits / kParts loads to wait for.
template <class S, int kRows, bool kChunked>
__global__ void __launch_bounds__(256) attention_combine_kernel(const __grid_constant__ AttentionParams<S> p) {
  release_then_wait();  // dependent_launch.cuh: nothing of the step is touched before this
  using T = AttentionTiles<S, kRows>;
  constexpr int kHd = S::kHeadDim, kThreads = 256, kWarps = kThreads / 32;
  constexpr int kDimThreads = kHd / 4, kParts = kThreads / kDimThreads;
  static_assert(T::kSplits <= kThreads && kHd <= kThreads, "combine: one thread per split and per dim");
  const int h = blockIdx.x, row = blockIdx.y, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int ctx = attention_detail::row_position<kChunked>(p.pos, row) + 1;
  const int len = attention_detail::split_tokens<T>(ctx);
  const int active = (ctx + len - 1) / len;
  const int64_t slot0 = (int64_t(row) * S::kHeads + h) * T::kSplits;
  const float2* ml_part = reinterpret_cast<const float2*>(p.partial + int64_t(kRows) * S::kHeads * T::kSplits * kHd) + slot0;

  // The gate is the only operand of the tail: loaded first, so the store waits for no load.
  const float gate = tid < kHd ? __bfloat162float(p.qg[(int64_t(row) * S::kHeads + h) * 2 * kHd + kHd + tid]) : 0.0f;
  __shared__ float weight[T::kSplits];
  __shared__ float red[2][kWarps];
  __shared__ __align__(16) float sums[kParts][kHd];
  const float2 ml = tid < active ? ml_part[tid] : make_float2(-INFINITY, 0.0f);
  // This thread's first kPre partial outputs are loaded with the (max, sum) pairs, not after the
  // reductions that weigh them: the kernel then waits for one round trip of loads, not two.
  const int part = tid / kDimThreads, d = (tid % kDimThreads) * 4;
  const float* o_part = p.partial + slot0 * kHd + d;
  constexpr int kPerThread = (T::kSplits + kParts - 1) / kParts;
  constexpr int kPre = kPerThread < 4 ? kPerThread : 4;
  float4 pre[kPre];
#pragma unroll
  for (int u = 0; u < kPre; ++u) {
    const int s = part + u * kParts;
    pre[u] = s < active ? *reinterpret_cast<const float4*>(o_part + int64_t(s) * kHd) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  float mx = warp_max(ml.x);
  if (lane == 0) red[0][warp] = mx;
  __syncthreads();
  mx = red[0][0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) mx = fmaxf(mx, red[0][w]);
  const float wgt = tid < active ? exp2f(ml.x - mx) : 0.0f;
  if (tid < active) weight[tid] = wgt;
  const float sum = warp_sum(wgt * ml.y);
  if (lane == 0) red[1][warp] = sum;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += red[1][w];

  float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int u = 0; u < kPre; ++u) {
    const int s = part + u * kParts;
    if (s < active) {
      const float w = weight[s];
      o.x += w * pre[u].x;
      o.y += w * pre[u].y;
      o.z += w * pre[u].z;
      o.w += w * pre[u].w;
    }
  }
#pragma unroll 4
  for (int s = part + kPre * kParts; s < active; s += kParts) {
    const float w = weight[s];
    const float4 x = *reinterpret_cast<const float4*>(o_part + int64_t(s) * kHd);
    o.x += w * x.x;
    o.y += w * x.y;
    o.z += w * x.z;
    o.w += w * x.w;
  }
  *reinterpret_cast<float4*>(&sums[part][d]) = o;
  __syncthreads();
  if (tid < kHd) {
    float acc = 0.0f;
#pragma unroll
    for (int q = 0; q < kParts; ++q) acc += sums[q][tid];
    p.out[(int64_t(row) * S::kHeads + h) * kHd + tid] = __float2bfloat16_rn(acc / total * (1.0f / (1.0f + expf(-gate))));
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

template <class S, int kRows, bool kChunked>
void attention_paged(const AttentionParams<S>& p, cudaStream_t stream) {
  using T = AttentionTiles<S, kRows>;
  launch_dependent(attention_split_kernel<S, kRows, kChunked>, dim3(T::kSplits, S::kKvHeads, kRows), T::kWarps * 32, 0, stream, p);
  launch_dependent(attention_combine_kernel<S, kRows, kChunked>, dim3(S::kHeads, kRows), 256, 0, stream, p);
}

// Decode for one bucket of B rows, row r through the page table of slot slots[r]. REQUIRES: device
// pointers; pos[r] + 1 <= table_width · kPageTokens; the page holding pos[r] belongs to row r alone
// (copy-on-extend), pages below it may be shared and are not written during the step; k_cache,
// v_cache, page_stride 16-byte aligned; partial holds AttentionTiles<S, B>::kPartialFloats.
template <class S, int B>
void attention_decode(const AttentionParams<S>& p, cudaStream_t stream) {
  CHECK(p.qg && p.k && p.v && p.q_norm && p.k_norm && p.k_cache && p.v_cache && p.page_table && p.slots && p.pos && p.rope_at &&
            p.partial && p.out,
        "attention_decode: null pointer");
  CHECK(p.page_stride % 8 == 0 && p.table_width > 0, "attention_decode: page stride must keep 16-byte alignment");
  attention_paged<S, B, false>(p, stream);
}

}  // namespace rocket::cuda
