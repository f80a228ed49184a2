// Gated DeltaNet recurrent step on the H200 (host reference: kernels/host/gdn.h, then
// kernels/host/rms_norm.h rms_norm_gated), fused from the conv output to the gated-normed core output:
//
//   q, k  = l2norm(q), l2norm(k) of the value head's key head (h / (Hv/Hk)); q *= 1/sqrt(Kd)
//   beta  = sigmoid(b);  decay = exp(-exp(A_log) · softplus(a + dt_bias))
//   S    *= decay;  delta = (v − Sᵀk) · beta;  S += k deltaᵀ;  o = Sᵀq
//   out   = norm_w · (o · rsqrt(mean(o²) + eps)) · silu(z)           (per value head, over Vd)
//
// Bandwidth-bound on the FP32 state [Hv][Kd][Vd] per stream: each (row, value head) reads its state
// once and writes it once. The columns of S are independent in the delta rule (only the sums over Kd
// couple rows), so a head's Vd columns are split over a cluster of kSplit blocks; each block keeps its
// Kd × Vd/kSplit slice in registers for the whole call, and the blocks of a cluster exchange only the
// per-token sums of o² that the gated norm needs (distributed shared memory).
//
// Work is split into groups like the conv (conv1d.cuh): decode runs one group per bucket row with one
// token; prefill runs one group (one stream) with the chunk's tokens in order, so the state is read
// and written once per chunk.
//
// State layout (the plan's gdn_state buffer, shared with the host booster): fp32
// [slot][linear layer][Hv][Kd][Vd]. The caller passes this layer's state of slot 0 and the distance
// between slots.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"
#include "kernels/cuda/primitives/reduce.cuh"
#include "kernels/tiling/gdn.h"

namespace rocket::cuda {

struct GdnParams {
  const __nv_bfloat16* qkv = nullptr;      // [rows][kConvDim]: conv output, q | k | v
  const __nv_bfloat16* a = nullptr;        // [rows][Hv]: in_proj_a output
  const __nv_bfloat16* b = nullptr;        // [rows][Hv]: in_proj_b output
  const __nv_bfloat16* z = nullptr;        // [rows][kValueDim]: in_proj_z output
  const __nv_bfloat16* a_log = nullptr;    // [Hv]
  const __nv_bfloat16* dt_bias = nullptr;  // [Hv]
  const __nv_bfloat16* norm_w = nullptr;   // [Vd]: the gated norm's gain (plain, not zero-centred)
  float* state = nullptr;                  // this layer's recurrent state of slot 0
  int64_t slot_stride = 0;                 // floats between consecutive slots' states
  const int32_t* slots = nullptr;          // [groups], device memory
  __nv_bfloat16* out = nullptr;            // [rows][kValueDim]
  int tokens = 1;                          // rows per group
  float eps = 1e-6f;                       // the gated norm's epsilon
};

// Shapes of one chemistry's GDN layer, and the tiling that follows from them (kernels/tiling/gdn.h):
// kWantColumns columns of a value head per block (capped at Vd), four threads per column.
template <int kKHeads_, int kVHeads_, int kKDim_, int kVDim_, int kWantColumns = tiling::kGdnPrefillColumns>
struct GdnShape {
  static constexpr int kKHeads = kKHeads_, kVHeads = kVHeads_, kKDim = kKDim_, kVDim = kVDim_;
  static constexpr int kKeyDim = kKHeads * kKDim;
  static constexpr int kValueDim = kVHeads * kVDim;
  static constexpr int kConvDim = 2 * kKeyDim + kValueDim;
  static constexpr int kGroup = kVHeads / kKHeads;  // value heads per key head

  static constexpr tiling::GdnTiling kTiling = tiling::gdn_tiling(kKDim, kVDim, kWantColumns);
  static constexpr int kColumns = kTiling.columns;
  static constexpr int kSplit = kTiling.split;      // blocks (a cluster) per value head
  static constexpr int kColVecs = kTiling.col_vecs;  // lanes across a row slice
  static constexpr int kThreads = kTiling.threads;
  static constexpr int kWarps = kTiling.warps;
  template <int kCols>
  using WithColumns = GdnShape<kKHeads, kVHeads, kKDim, kVDim, kCols>;
  static constexpr int kRowGroups = kTiling.row_groups;
  static constexpr int kRows = kTiling.rows;  // state rows per thread: 4 * kRows floats in registers

  static_assert(kVHeads % kKHeads == 0, "value heads must be a multiple of key heads");
  static_assert(kVDim % kColumns == 0 && kColumns % 4 == 0 && 32 % kColVecs == 0, "column tiling");
  static_assert(kKDim % kRowGroups == 0, "key dim must split evenly over the row groups");
  static_assert(kKDim % 32 == 0, "q/k l2 norms are warp sums over Kd");
  static_assert(kSplit <= 8, "a portable cluster holds at most 8 blocks");
  static_assert(kThreads >= 32 && kThreads <= 1024, "gdn: block size");
};

// Decode tiling per bucket (kernels/tiling/gdn.h: 32 columns per block below 8 rows, 64 from 8).
template <class S, int B>
struct GdnDecodeTiling {
  using Shape = typename S::template WithColumns<tiling::gdn_decode_columns(B)>;
  static constexpr tiling::KernelTiles kTiles = tiling::gdn_decode_tiles(S::kVHeads, S::kKDim, S::kVDim, B);
};

template <class S, int kMaxTokens>
struct GdnSmem {
  float qk[kMaxTokens][2][S::kKDim];       // raw q and k of the token's key head
  float v[kMaxTokens][S::kColumns];        // this block's value columns
  float o[kMaxTokens][S::kColumns];        // core output before the gated norm
  float part[2][S::kWarps][S::kColumns];   // cross-warp partial sums: [0] Sᵀk, [1] Sᵀq
  float ss_part[kMaxTokens][2][S::kKDim / 32];  // sums of squares of q and k, one per 32 dims
  float inv_qk[kMaxTokens][2];                   // l2 norm inverses of q and k
  float gate[kMaxTokens][2];               // decay, beta
  float o_sq[kMaxTokens];                  // this block's share of sum(o²); read by the whole cluster
  float inv_o[kMaxTokens];
  float gain[S::kColumns];                  // the gated norm's gain of this block's columns
  __nv_bfloat16 z[kMaxTokens][S::kColumns];  // the gated norm's gate input
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

template <class S, int kMaxTokens>
__global__ void __cluster_dims__(S::kSplit, 1, 1) __launch_bounds__(S::kThreads)
    gdn_kernel(const __grid_constant__ GdnParams p) {
  static_assert(sizeof(GdnSmem<S, kMaxTokens>) <= 48 * 1024, "gdn: static shared memory over 48 KiB");
  static_assert(2 * kMaxTokens <= S::kThreads, "one thread per token computes its gates, one per q or k its l2 norm");
  __shared__ GdnSmem<S, kMaxTokens> sm;
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank());
  const int head_block = blockIdx.x / S::kSplit;
  const int group = head_block / S::kVHeads, h = head_block % S::kVHeads, kh = h / S::kGroup;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int cv = tid % S::kColVecs, rg = tid / S::kColVecs;
  const int col0 = rank * S::kColumns;  // first column of this block within the head
  const int tokens = p.tokens;
  const int64_t row0 = int64_t(group) * tokens;

  // Issue the state loads first, before the chain's wait: this layer's state is read and written by
  // this kernel alone (dependent_launch.cuh, rule 1), so its latency hides behind the kernel before
  // this one and the pre-processing below.
  float* state = p.state + int64_t(p.slots[group]) * p.slot_stride + int64_t(h) * S::kKDim * S::kVDim;
  float4 st[S::kRows];
#pragma unroll
  for (int r = 0; r < S::kRows; ++r)
    st[r] = __ldcs(reinterpret_cast<const float4*>(state + int64_t(rg + r * S::kRowGroups) * S::kVDim + col0) + cv);
  // The gate constants and the gated norm's gain are weights: read before the wait as well.
  const float a_log = __bfloat162float(p.a_log[h]), dt_bias = __bfloat162float(p.dt_bias[h]);
  if (tid < S::kColumns) sm.gain[tid] = __bfloat162float(p.norm_w[col0 + tid]);
  enter_chain();
  // Everything this block reads of the step's activations, in one round trip: a and b into registers,
  // then each token's q, k, this block's v and z columns (kPerToken values) in batches whose loads are
  // all issued before any is stored to shared memory (a loop that stores each value as it loads it
  // waits for every load in turn). The kernel's tail then waits for no load.
  float a_in = 0.0f, b_in = 0.0f;
  if (tid < tokens) {
    a_in = __bfloat162float(p.a[(row0 + tid) * S::kVHeads + h]);
    b_in = __bfloat162float(p.b[(row0 + tid) * S::kVHeads + h]);
  }
  {
    constexpr int kPerToken = 2 * S::kKDim + 2 * S::kColumns;
    constexpr int kPerThread = (kMaxTokens * kPerToken + S::kThreads - 1) / S::kThreads;
    constexpr int kBatch = kPerThread < 4 ? kPerThread : 4;
    // A warp's 32 consecutive values then lie in one 32-dim piece of one q or k (or in v, z), so the
    // warp sums that piece's squares for the l2 norms as it stores it.
    static_assert(kPerToken % 32 == 0 && S::kThreads % 32 == 0, "gdn gather: pieces of 32 values per warp");
    const auto source = [&](int i) {
      const int t = i / kPerToken, j = i % kPerToken;
      if (j < 2 * S::kKDim)
        return p.qkv + (row0 + t) * S::kConvDim + (j / S::kKDim) * S::kKeyDim + kh * S::kKDim + j % S::kKDim;
      if (j < 2 * S::kKDim + S::kColumns)
        return p.qkv + (row0 + t) * S::kConvDim + 2 * S::kKeyDim + h * S::kVDim + col0 + j - 2 * S::kKDim;
      return p.z + (row0 + t) * S::kValueDim + h * S::kVDim + col0 + j - 2 * S::kKDim - S::kColumns;
    };
    for (int i0 = tid; i0 < tokens * kPerToken; i0 += kBatch * S::kThreads) {
      __nv_bfloat16 in[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * S::kThreads;
        if (i < tokens * kPerToken) in[u] = *source(i);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * S::kThreads, t = i / kPerToken, j = i % kPerToken;
        if (i >= tokens * kPerToken) break;
        if (j < 2 * S::kKDim) {
          const float f = __bfloat162float(in[u]);
          sm.qk[t][j / S::kKDim][j % S::kKDim] = f;
          const float ss = warp_sum(f * f);
          if (lane == 0) sm.ss_part[t][j / S::kKDim][j % S::kKDim / 32] = ss;
        } else if (j < 2 * S::kKDim + S::kColumns) sm.v[t][j - 2 * S::kKDim] = __bfloat162float(in[u]);
        else sm.z[t][j - 2 * S::kKDim - S::kColumns] = in[u];
      }
    }
  }
  if (tid < tokens) {
    // Same formulas as the host engine: beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias).
    const float x = a_in + dt_bias;
    const float softplus = x > 20.0f ? x : log1pf(expf(x));
    sm.gate[tid][0] = expf(-expf(a_log) * softplus);
    sm.gate[tid][1] = 1.0f / (1.0f + expf(-b_in));
  }
  __syncthreads();
  if (tid < 2 * tokens) {
    float ss = 0.0f;
#pragma unroll
    for (int c = 0; c < S::kKDim / 32; ++c) ss += sm.ss_part[tid / 2][tid % 2][c];
    sm.inv_qk[tid / 2][tid % 2] = 1.0f / sqrtf(ss + 1e-6f);
  }
  __syncthreads();

  // HF: scale = 1 / head_k_dim ** 0.5 in double, applied to fp32 q as an fp32 scalar.
  const float q_scale = float(1.0 / sqrt(double(S::kKDim)));
  for (int t = 0; t < tokens; ++t) {
    const float decay = sm.gate[t][0], beta = sm.gate[t][1];
    const float inv_k = sm.inv_qk[t][1], inv_q = sm.inv_qk[t][0];
    float kn[S::kRows];
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int r = 0; r < S::kRows; ++r) {
      kn[r] = sm.qk[t][1][rg + r * S::kRowGroups] * inv_k;
      st[r].x *= decay, st[r].y *= decay, st[r].z *= decay, st[r].w *= decay;
      acc.x += st[r].x * kn[r], acc.y += st[r].y * kn[r], acc.z += st[r].z * kn[r], acc.w += st[r].w * kn[r];
    }
#pragma unroll
    for (int o = S::kColVecs; o < 32; o <<= 1) {
      acc.x += __shfl_xor_sync(0xffffffffu, acc.x, o), acc.y += __shfl_xor_sync(0xffffffffu, acc.y, o);
      acc.z += __shfl_xor_sync(0xffffffffu, acc.z, o), acc.w += __shfl_xor_sync(0xffffffffu, acc.w, o);
    }
    if (lane < S::kColVecs) reinterpret_cast<float4*>(sm.part[0][warp])[cv] = acc;
    __syncthreads();
    float4 delta = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < S::kWarps; ++w) {
      const float4 pw = reinterpret_cast<const float4*>(sm.part[0][w])[cv];
      delta.x += pw.x, delta.y += pw.y, delta.z += pw.z, delta.w += pw.w;
    }
    const float4 v = reinterpret_cast<const float4*>(sm.v[t])[cv];
    delta = make_float4((v.x - delta.x) * beta, (v.y - delta.y) * beta, (v.z - delta.z) * beta, (v.w - delta.w) * beta);
    acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int r = 0; r < S::kRows; ++r) {
      const float qn = sm.qk[t][0][rg + r * S::kRowGroups] * inv_q * q_scale;
      st[r].x += kn[r] * delta.x, st[r].y += kn[r] * delta.y, st[r].z += kn[r] * delta.z, st[r].w += kn[r] * delta.w;
      acc.x += st[r].x * qn, acc.y += st[r].y * qn, acc.z += st[r].z * qn, acc.w += st[r].w * qn;
    }
#pragma unroll
    for (int o = S::kColVecs; o < 32; o <<= 1) {
      acc.x += __shfl_xor_sync(0xffffffffu, acc.x, o), acc.y += __shfl_xor_sync(0xffffffffu, acc.y, o);
      acc.z += __shfl_xor_sync(0xffffffffu, acc.z, o), acc.w += __shfl_xor_sync(0xffffffffu, acc.w, o);
    }
    if (lane < S::kColVecs) reinterpret_cast<float4*>(sm.part[1][warp])[cv] = acc;
    __syncthreads();
    if (tid < S::kColumns) {
      float o = 0.0f;
#pragma unroll
      for (int w = 0; w < S::kWarps; ++w) o += sm.part[1][w][tid];
      sm.o[t][tid] = o;
    }
  }
#pragma unroll
  for (int r = 0; r < S::kRows; ++r)
    __stcs(reinterpret_cast<float4*>(state + int64_t(rg + r * S::kRowGroups) * S::kVDim + col0) + cv, st[r]);
  __syncthreads();

  // Gated norm over the head's Vd outputs: each block sums o² over its columns, the cluster adds the
  // kSplit shares in rank order (the same order in every block, so all agree bit for bit).
  for (int t = warp; t < tokens; t += S::kWarps) {
    float ss = 0.0f;
    for (int c = lane; c < S::kColumns; c += 32) ss += sm.o[t][c] * sm.o[t][c];
    ss = warp_sum(ss);
    if (lane == 0) sm.o_sq[t] = ss;
  }
  cluster.sync();
  if (tid < tokens) {
    float ss = 0.0f;
#pragma unroll
    for (int r = 0; r < S::kSplit; ++r) ss += cluster.map_shared_rank(sm.o_sq, r)[tid];
    sm.inv_o[tid] = 1.0f / sqrtf(ss / float(S::kVDim) + p.eps);
  }
  cluster.sync();  // also keeps every block's o_sq alive until the whole cluster has read it
  for (int i = tid; i < tokens * S::kColumns; i += S::kThreads) {
    const int t = i / S::kColumns, c = i % S::kColumns, j = col0 + c;
    const int64_t at = (row0 + t) * S::kValueDim + h * S::kVDim + j;
    const float z = __bfloat162float(sm.z[t][c]);
    const float y = sm.gain[c] * (sm.o[t][c] * sm.inv_o[t]) * (z / (1.0f + expf(-z)));
    p.out[at] = __float2bfloat16_rn(y);
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// Decode: B rows, one token each, row i on slot slots[i].
template <class S, int B>
void gdn_decode(const GdnParams& p, cudaStream_t stream) {
  using T = typename GdnDecodeTiling<S, B>::Shape;
  static_assert(GdnDecodeTiling<S, B>::kTiles.grid == B * T::kVHeads * T::kSplit && GdnDecodeTiling<S, B>::kTiles.threads == T::kThreads &&
                    GdnDecodeTiling<S, B>::kTiles.smem_bytes == sizeof(GdnSmem<T, 1>),
                "gdn decode: the planned launch differs from this one");
  CHECK(p.tokens == 1, "gdn decode steps one token per row");
  launch_dependent(gdn_kernel<T, 1>, B * T::kVHeads * T::kSplit, T::kThreads, 0, stream, p);
}

// Prefill: one stream (slot slots[0]), p.tokens (1..kChunk) tokens in order.
template <class S, int kChunk>
void gdn_prefill(const GdnParams& p, cudaStream_t stream) {
  static_assert(sizeof(GdnSmem<S, kChunk>) == tiling::gdn_smem_bytes(S::kTiling, S::kKDim, kChunk),
                "gdn: the tiling's shared-memory bytes differ from the kernel's");
  CHECK(p.tokens >= 1 && p.tokens <= kChunk, "gdn prefill takes 1..chunk tokens");
  launch_dependent(gdn_kernel<S, kChunk>, S::kVHeads * S::kSplit, S::kThreads, 0, stream, p);
}

}  // namespace rocket::cuda
