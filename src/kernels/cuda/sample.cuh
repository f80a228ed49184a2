// Token selection on the H200 for the B rows of a decode step (and for a prompt's last row, after its
// prefill): greedy argmax and temperature / min_p / top-k / top-p sampling, drawing with the host
// sampler's counter-based generator (kernels/host/sample.h) so a seeded request picks the same token on
// either booster. A row whose knobs adjust its logits (SamplingKnobs::adjusts: logit_bias, penalties)
// reads its stream's sampling history (core/sampling_history.h) as it loads its slice: the bias added,
// then the penalties, each step rounded as host::adjust_logits rounds it; its draw is counted there.
// A masked row (SamplingKnobs::masked: a structured output's grammar) then reads its allowed-token
// bitmask from the step's mask rows (mapped pinned host memory the loop thread wrote before the launch)
// and gives every other token -inf, as grammar::mask_logits does on the host between the same phases.
// min_p zeroes e below min_p (e is the probability over the largest), as the host does. Per-row knobs
// (core/sampling_knobs.h) come from a device array, so one captured graph serves any mix of requests;
// tokens are written as int32 to device memory or, as the engine does, straight to mapped pinned host
// memory (no copy back after the step).
//
// A row is one cluster of kBlocks blocks; each block owns a contiguous slice of the vocabulary, and a
// thread a contiguous chunk of it (so "index order" is (block, thread, element) order). The sampler
// keeps its slice in shared memory as e = exp(s − max) (s the scaled logit), and orders tokens by
//   top-k   (s desc, index asc), the host's order for its top-k set
//   top-p   (e desc, index asc), and the draw's walk when a cut applies (in vocabulary order when none
//           does), matching the order the host sampler walks
// A cut (top-k or top-p) first looks for a threshold on e whose tokens hold the top-k set (count >= k)
// or the top-p prefix (mass >= top_p · total): such a set is an upper set of both orders, so the cut
// lies inside it. It counts tokens and mass at 7 thresholds a round, first e >= 2^-2 .. 2^-26, then
// splitting the interval around the cut into 8. Once the set holds at most kCandidates tokens (a
// model's peaked logits need one round, flat ones a few more), its tokens are gathered into block 0,
// sorted, cut and drawn from by that block alone. Otherwise (a top-k larger than the buffer, a tie
// group that no threshold splits, a cut below 2^-26) the cluster finds every cut by radix search over
// the whole row, 4 bits a round:
//   top-k   key = the scaled logit's order-preserving bits, weight 1; ties to the lower index
//   top-p   key = bits of e (e >= 0, so bits order like values), weight = e
//   draw    the inverse CDF at u · mass
// Masses are fixed-point integers (e · 2^45 with e <= 1, so a row of up to 2^18 tokens sums below 2^63),
// so every sum is exact and independent of reduction order: results are deterministic run to run.
//
// Agreement with the host: scaled logits (IEEE division) and e (exp in double, rounded to fp32: the
// correctly rounded value, which glibc's expf returns too but for rare cases) are the host's values, so
// the top-k set and the top-p prefix match exactly. Masses differ from the host's double sums by at most
// 2^-46 per token (fixed-point rounding), 2^-28 of the total mass for the a3b vocabulary: a seeded draw
// agrees with the host unless u · mass lies within that of a cumulative boundary, and a token whose
// probability is below 2^-46 of the maximum is never drawn here.
// NOTE: with top-k and no top-p, this draw walks the kept tokens in (probability desc, index asc) order.
// The host sampler must walk them in that order too (it sorts them only when top-p applies; without
// the sort its order is whatever nth_element left), or such draws differ between the boosters.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "core/sampling_history.h"
#include "core/sampling_knobs.h"
#include "kernels/cuda/booster.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"
#include "kernels/cuda/primitives/reduce.cuh"
#include "kernels/cuda/primitives/smem_limit.cuh"
#include "kernels/tiling/sample.h"

namespace rocket::cuda {

struct SampleParams {
  const float* logits = nullptr;         // [rows][kVocab]
  const SamplingKnobs* knobs = nullptr;  // [rows]
  int32_t* tokens = nullptr;         // [rows], device or mapped pinned host memory
  // Sampling histories by stream slot (SamplingKnobs::history); read only by rows that adjust.
  int32_t* counts = nullptr;         // [slots][kVocab]: a row's draw is counted in its slot
  const uint32_t* prompt = nullptr;  // [slots][history_prompt_words(kVocab)]
  const LogitBias* bias = nullptr;   // [slots][kMaxLogitBias]
  // Allowed-token bitmasks by row (bit t of word t / 32, grammar::Matcher::fill_mask's layout), read
  // only by rows whose knobs are `masked`; each row holds at least one allowed token.
  const uint32_t* mask = nullptr;    // [rows][mask_words(kVocab)]
};

// Words of one row's allowed-token bitmask.
__host__ __device__ constexpr int mask_words(int vocab) { return (vocab + 31) / 32; }

template <int kVocab>
struct SampleTraits {
  static constexpr tiling::SampleTiling kTiling = tiling::sample_tiling(kVocab);
  static constexpr int kBlocks = kTiling.blocks;  // cluster per row: the portable maximum
  static constexpr int kThreads = kTiling.threads;
  static constexpr int kWarps = kTiling.warps;
  // Elements per thread, odd so that threads reading their own chunks hit distinct banks.
  static constexpr int kPerThread = kTiling.per_thread;
  static constexpr int kSlice = kTiling.slice;            // elements per block
  static constexpr int kCandidates = kTiling.candidates;  // a cut's gather buffer in block 0: 8-byte sort keys
  static constexpr int kSmemBytes = kTiling.smem_bytes;
  static constexpr int kDepths = 7;         // candidate thresholds a round: first e >= 2^-(4t+2), t < kDepths
  static constexpr int kDepthRounds = 5;    // rounds of thresholds before the cut falls back to radix search
  static constexpr int kFixedShift = 45;    // mass = e · 2^45
  static_assert(kVocab % 4 == 0, "argmax reads the row as float4");
  static_assert(uint64_t(kVocab) << kFixedShift < (uint64_t(1) << 63), "fixed-point mass overflows");
  static_assert(kCandidates % kThreads == 0 && (kCandidates & (kCandidates - 1)) == 0, "candidate scan and sort");
  static_assert(2 * kDepths <= 15, "one cluster reduction carries each threshold's count and mass");
  static_assert(kSmemBytes + 4096 <= kBooster.smem_per_block, "sample: slice exceeds the booster's per-block shared memory");
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

namespace sample_detail {

namespace cg = cooperative_groups;

__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// host::counter_uniform, bit for bit.
__device__ __forceinline__ double counter_uniform(uint64_t seed, uint64_t counter) {
  return double(splitmix64(splitmix64(seed) + counter) >> 11) * 0x1.0p-53;
}

__device__ __forceinline__ uint64_t fixed_mass(float e, int shift) { return __float2ull_rn(ldexpf(e, shift)); }

// e = exp(s − max) as the host computes it (expf of the float difference, correctly rounded: exp in
// double rounded to fp32). Below −33 its fixed-point mass rounds to 0 (e · 2^45 < 0.2), so it may be
// 0 without changing any cut or draw, and the exp is skipped.
__device__ __forceinline__ float scaled_exp(float s, float top) {
  const float d = s - top;
  return d < -33.0f ? 0.0f : float(exp(double(d)));
}

// e, or 0 below min_p: the token's probability over the largest is under min_p (host::select_token).
__device__ __forceinline__ float kept_exp(float s, float top, float min_p) {
  const float e = scaled_exp(s, top);
  return e < min_p ? 0.0f : e;
}

// One row's sampling history, where its knobs adjust the logits (SamplingKnobs::adjusts).
template <int kVocab>
struct RowHistory {
  static constexpr int kWords = history_prompt_words(kVocab);
  int32_t* counts = nullptr;  // [kVocab]
  const uint32_t* prompt = nullptr;
  const LogitBias* bias = nullptr;

  __device__ RowHistory(const SampleParams& p, const SamplingKnobs& k)
      : counts(p.counts + int64_t(k.history) * kVocab), prompt(p.prompt + int64_t(k.history) * kWords),
        bias(p.bias + int64_t(k.history) * kMaxLogitBias) {}

  // The penalties on a (biased) logit of token v, as host::adjust_logits applies them.
  __device__ __forceinline__ float penalized(float x, int v, const SamplingKnobs& k) const {
    const int32_t c = counts[v];
    const bool in_prompt = (prompt[v / 32] >> (v % 32)) & 1u;
    if (k.repetition_penalty != 1.0f && (c > 0 || in_prompt))
      x = x > 0.0f ? __fdiv_rn(x, k.repetition_penalty) : __fmul_rn(x, k.repetition_penalty);
    x = __fsub_rn(x, __fmul_rn(k.frequency_penalty, float(c)));
    return c > 0 ? __fsub_rn(x, k.presence_penalty) : x;
  }
  // Token v's adjusted logit on its own (a cut's candidates): its bias looked up, then penalized.
  __device__ __forceinline__ float adjusted(const float* logits, int v, const SamplingKnobs& k) const {
    float x = logits[v];
    for (int b = 0; b < k.logit_bias; ++b)
      if (bias[b].token == v) {
        x = __fadd_rn(x, bias[b].bias);
        break;
      }
    return penalized(x, v, k);
  }
};

// The first round of a cut's candidate thresholds: e >= 2^-(4t+2).
__device__ __forceinline__ float depth_threshold(int t) { return __uint_as_float(uint32_t(125 - 4 * t) << 23); }

// Sorts a[0, n) descending, n a power of two, by the block's kThreads threads (bitonic network).
// REQUIRES: a barrier between the last writes to `a` and the call; ends with one.
template <int kThreads>
__device__ __forceinline__ void block_sort_desc(uint64_t* a, int n) {
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n / 2; i += kThreads) {
        const int lo = ((i & ~(j - 1)) << 1) | (i & (j - 1)), hi = lo + j;
        const uint64_t a0 = a[lo], a1 = a[hi];
        if ((a0 < a1) == ((lo & k) == 0)) a[lo] = a1, a[hi] = a0;
      }
      __syncthreads();
    }
  }
}


template <int kThreads>
struct Exchange {
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kMax = 15;
  uint64_t warp_part[kWarps][kMax];
  uint64_t block_part[2][kMax];  // read remotely; alternates so one cluster barrier per reduction suffices
  uint64_t result[kMax];
  uint64_t scan[kWarps];  // block scans' warp totals
  int64_t found;          // an index broadcast to the whole cluster (or, in block 0's cut, the block)
  uint64_t through;       // block 0's cut: the running mass through `found`
  int phase;
};

// Cluster-wide reduction of N u64 values (sum or max); every thread of every block gets the result.
template <int N, bool kMax, int kThreads>
__device__ __forceinline__ void cluster_reduce(uint64_t (&v)[N], Exchange<kThreads>& x, const cg::cluster_group& cluster) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int n = 0; n < N; ++n) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const uint64_t other = __shfl_xor_sync(0xffffffffu, v[n], o);
      v[n] = kMax ? (other > v[n] ? other : v[n]) : v[n] + other;
    }
    if (lane == 0) x.warp_part[warp][n] = v[n];
  }
  __syncthreads();
  const int phase = x.phase;
  if (threadIdx.x < N) {
    uint64_t t = x.warp_part[0][threadIdx.x];
    for (int w = 1; w < Exchange<kThreads>::kWarps; ++w) {
      const uint64_t o = x.warp_part[w][threadIdx.x];
      t = kMax ? (o > t ? o : t) : t + o;
    }
    x.block_part[phase][threadIdx.x] = t;
  }
  cluster.sync();
  if (threadIdx.x < N) {
    uint64_t t = cluster.map_shared_rank(x.block_part[phase], 0)[threadIdx.x];
    for (unsigned r = 1; r < cluster.num_blocks(); ++r) {
      const uint64_t o = cluster.map_shared_rank(x.block_part[phase], r)[threadIdx.x];
      t = kMax ? (o > t ? o : t) : t + o;
    }
    x.result[threadIdx.x] = t;
  }
  __syncthreads();
  if (threadIdx.x == 0) x.phase = phase ^ 1;  // read by every thread above, before this barrier
#pragma unroll
  for (int n = 0; n < N; ++n) v[n] = x.result[n];
  __syncthreads();
}

// The (0-based) index-order position of the first element at which the running sum of `weight`
// reaches `target`, found by the one thread whose chunk holds it; broadcast to x.found in every block.
// REQUIRES: 1 <= target <= the row's total weight.
template <int kThreads, int kPerThread, class Weight>
__device__ __forceinline__ int64_t find_in_index_order(Weight weight, uint64_t target, Exchange<kThreads>& x,
                                                       const cg::cluster_group& cluster, int64_t chunk0) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint64_t mine = 0;
#pragma unroll 4
  for (int j = 0; j < kPerThread; ++j) mine += weight(j);
  uint64_t incl = mine;  // inclusive scan within the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t up = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += up;
  }
  uint64_t before[1] = {incl - mine};
  // Warp totals, then block totals across the cluster, both as exclusive prefixes.
  if (lane == 31) x.warp_part[warp][0] = incl;
  __syncthreads();
  const int phase = x.phase;
  for (int w = 0; w < warp; ++w) before[0] += x.warp_part[w][0];
  if (threadIdx.x == 0) {
    uint64_t t = 0;
    for (int w = 0; w < Exchange<kThreads>::kWarps; ++w) t += x.warp_part[w][0];
    x.block_part[phase][0] = t;
  }
  cluster.sync();
  for (unsigned r = 0; r < cluster.block_rank(); ++r) before[0] += cluster.map_shared_rank(x.block_part[phase], r)[0];
  if (before[0] < target && target <= before[0] + mine) {
    uint64_t run = before[0];
    int j = 0;
    for (; j < kPerThread; ++j)
      if ((run += weight(j)) >= target) break;
    for (unsigned r = 0; r < cluster.num_blocks(); ++r) *cluster.map_shared_rank(&x.found, r) = chunk0 + j;
  }
  __syncthreads();
  if (threadIdx.x == 0) x.phase = phase ^ 1;
  cluster.sync();  // the broadcast has landed everywhere
  return x.found;
}

// Radix search over 32-bit keys in descending order: the largest key θ with W(key >= θ) >= target,
// where W sums `weight` over the row; returns θ and W(key > θ) (`above`). REQUIRES: target >= 1 and
// target <= the row's total weight.
template <int kThreads, int kPerThread, class Key, class Weight>
__device__ __forceinline__ uint32_t radix_search(Key key, Weight weight, uint64_t target, uint64_t& above,
                                                 Exchange<kThreads>& x, const cg::cluster_group& cluster) {
  uint32_t theta = 0;
#pragma unroll 1
  for (int shift = 28; shift >= 0; shift -= 4) {
    uint64_t w[15];
#pragma unroll
    for (int b = 0; b < 15; ++b) w[b] = 0;
#pragma unroll 1
    for (int j = 0; j < kPerThread; ++j) {
      const uint32_t k = key(j);
      const uint64_t wt = weight(j);
#pragma unroll
      for (int b = 0; b < 15; ++b) w[b] += k >= (theta | (uint32_t(b + 1) << shift)) ? wt : 0;
    }
    cluster_reduce<15, false>(w, x, cluster);
    uint32_t digit = 0;
#pragma unroll
    for (int b = 0; b < 15; ++b)
      if (w[b] >= target) digit = b + 1;
    theta |= digit << shift;
  }
  uint64_t gt[1] = {0};
  for (int j = 0; j < kPerThread; ++j) gt[0] += key(j) > theta ? weight(j) : 0;
  cluster_reduce<1, false>(gt, x, cluster);
  above = gt[0];
  return theta;
}

// Index of the largest value of `row` (lowest index on ties), for every thread of the cluster: the
// max of (ordered value bits << 32 | ~index) is exactly that.
template <int kVocab, int kThreads>
__device__ __forceinline__ int32_t row_argmax(const float* row, Exchange<kThreads>& x, const cg::cluster_group& cluster) {
  uint64_t best[1] = {0};
  const int stride = int(cluster.num_blocks()) * kThreads;
  for (int v = int(cluster.block_rank()) * kThreads + threadIdx.x; v < kVocab / 4; v += stride) {
    const float4 f = __ldcs(reinterpret_cast<const float4*>(row) + v);
    const float e[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint64_t k = uint64_t(ordered_key(e[i])) << 32 | (0xffffffffu - uint32_t(4 * v + i));
      best[0] = k > best[0] ? k : best[0];
    }
  }
  cluster_reduce<1, true>(best, x, cluster);
  return int32_t(0xffffffffu - uint32_t(best[0]));
}

}  // namespace sample_detail

template <int kVocab>
__global__ void __cluster_dims__(SampleTraits<kVocab>::kBlocks, 1, 1) __launch_bounds__(SampleTraits<kVocab>::kThreads)
    argmax_kernel(const __grid_constant__ SampleParams p) {
  enter_chain();  // dependent_launch.cuh: nothing of the step is touched before this
  using T = SampleTraits<kVocab>;
  namespace sd = sample_detail;
  __shared__ sd::Exchange<T::kThreads> x;
  const sd::cg::cluster_group cluster = sd::cg::this_cluster();
  if (threadIdx.x == 0) x.phase = 0;
  __syncthreads();
  const int row = blockIdx.x / T::kBlocks;
  const int32_t token = sd::row_argmax<kVocab>(p.logits + int64_t(row) * kVocab, x, cluster);
  if (cluster.block_rank() == 0 && threadIdx.x == 0) p.tokens[row] = token;
  cluster.sync();  // no block leaves while another may still read its exchange buffers
}

namespace sample_detail {

// The top-p target over a row of `total` mass: the host keeps the shortest prefix whose mass reaches
// top_p · total.
__device__ __forceinline__ uint64_t top_p_target(float top_p, uint64_t total) {
  const double need = ceil(double(top_p) * double(total));
  return need < 1.0 ? 1 : (need >= double(total) ? total : uint64_t(need));
}

// The draw's target over `mass`. Host: u = uniform · mass, the first token with u < running mass; in
// integers, the first whose running mass reaches floor(u) + 1.
__device__ __forceinline__ uint64_t draw_target(const SamplingKnobs& knobs, uint64_t mass) {
  const double u = counter_uniform(knobs.seed, knobs.counter) * double(mass);
  return min(uint64_t(u) + 1, mass);
}

// Block 0's cut over the n gathered candidates c[0, n), keys (ordered s << 32 | ~index): sort by
// (s desc, index asc), keep the top k, re-key as (e << 32 | ~index) and sort again, then find the top-p
// prefix and the draw by running mass. `total` is the whole row's mass (the draw's mass when no top-k
// applies). Returns the token, for every thread of the block.
template <class T>
__device__ __forceinline__ int32_t draw_from_candidates(uint64_t* c, int n, const SamplingKnobs& knobs, bool top_k, float top,
                                                        uint64_t total, Exchange<T::kThreads>& x) {
  const auto pow2_ceil = [](int v) { return v <= 1 ? 1 : 1 << (32 - __clz(v - 1)); };
  const int sorted = pow2_ceil(n);
  for (int i = n + threadIdx.x; i < sorted; i += T::kThreads) c[i] = 0;
  __syncthreads();
  block_sort_desc<T::kThreads>(c, sorted);
  const int kept = top_k ? knobs.top_k : n;
  const int resorted = pow2_ceil(kept);
  for (int i = threadIdx.x; i < resorted; i += T::kThreads) {
    const float e = kept_exp(from_ordered_key(uint32_t(c[i] >> 32)), top, knobs.min_p);
    c[i] = i < kept ? uint64_t(__float_as_uint(e)) << 32 | uint32_t(c[i]) : 0;
  }
  __syncthreads();
  block_sort_desc<T::kThreads>(c, resorted);

  constexpr int kPer = T::kCandidates / T::kThreads;  // thread t owns positions [t·kPer, +kPer)
  const int i0 = threadIdx.x * kPer;
  uint64_t m[kPer], sum = 0;
#pragma unroll
  for (int q = 0; q < kPer; ++q) {
    m[q] = i0 + q < kept ? fixed_mass(__uint_as_float(uint32_t(c[i0 + q] >> 32)), T::kFixedShift) : 0;
    sum += m[q];
  }
  uint64_t kept_mass;
  const uint64_t before = block_exclusive_scan<T::kThreads>(sum, x.scan, kept_mass);
  // The first position whose running mass reaches target (1 <= target <= kept_mass), and the mass
  // through it, for every thread.
  const auto locate = [&](uint64_t target, uint64_t& through) {
    if (before < target && target <= before + sum) {
      uint64_t run = before;
#pragma unroll
      for (int q = 0; q < kPer; ++q) {
        run += m[q];
        if (run >= target) {
          x.found = i0 + q, x.through = run;
          break;
        }
      }
    }
    __syncthreads();
    const int64_t at = x.found;
    through = x.through;
    __syncthreads();
    return at;
  };
  uint64_t mass = top_k ? kept_mass : total;
  if (knobs.top_p < 1.0f) locate(top_p_target(knobs.top_p, mass), mass);
  uint64_t through;
  const int64_t at = locate(draw_target(knobs, mass), through);
  return int32_t(0xffffffffu - uint32_t(c[at]));
}

}  // namespace sample_detail

template <int kVocab>
__global__ void __cluster_dims__(SampleTraits<kVocab>::kBlocks, 1, 1) __launch_bounds__(SampleTraits<kVocab>::kThreads)
    sample_kernel(const __grid_constant__ SampleParams p) {
  enter_chain();  // dependent_launch.cuh: nothing of the step is touched before this
  using T = SampleTraits<kVocab>;
  namespace sd = sample_detail;
  extern __shared__ uint64_t smem[];
  uint64_t* candidates = smem;                                 // [kCandidates]: block 0's gathered cut
  float* s = reinterpret_cast<float*>(smem + T::kCandidates);  // [kSlice]: scaled logits, then e;
                                                               // thread t owns [t·kPerThread, +kPerThread)
  __shared__ sd::Exchange<T::kThreads> x;
  const sd::cg::cluster_group cluster = sd::cg::this_cluster();
  if (threadIdx.x == 0) x.phase = 0;
  __syncthreads();
  const int row = blockIdx.x / T::kBlocks;
  const SamplingKnobs knobs = p.knobs[row];
  const float* logits = p.logits + int64_t(row) * kVocab;
  const bool adjusts = knobs.adjusts();
  const uint32_t* allowed = knobs.masked && p.mask ? p.mask + int64_t(row) * mask_words(kVocab) : nullptr;
  // The row's token, written by one thread once every read of the row and its history is done.
  const auto emit = [&](int32_t token) {
    p.tokens[row] = token;
    if (adjusts) sd::RowHistory<kVocab>(p, knobs).counts[token] += 1;
  };
  if (knobs.temperature <= 0.0f && !adjusts && !allowed) {
    const int32_t token = sd::row_argmax<kVocab>(logits, x, cluster);
    if (cluster.block_rank() == 0 && threadIdx.x == 0) emit(token);
    cluster.sync();
    return;
  }
  const int64_t slice0 = int64_t(cluster.block_rank()) * T::kSlice;
  const int64_t chunk0 = slice0 + int64_t(threadIdx.x) * T::kPerThread;
  float* mine = s + threadIdx.x * T::kPerThread;
  // The slice's adjusted logits (the adjust phase: bias, then penalties), masked by the row's grammar,
  // divided by the temperature when sampling. A masked token's e is 0, so no cut gathers it: the
  // candidates' logits re-read below need no mask.
  const auto load_slice = [&] {
    for (int i = threadIdx.x; i < T::kSlice; i += T::kThreads)
      s[i] = slice0 + i < kVocab ? __ldcs(logits + slice0 + i) : -INFINITY;
    if (adjusts) {
      const sd::RowHistory<kVocab> h(p, knobs);
      __syncthreads();
      for (int b = threadIdx.x; b < knobs.logit_bias; b += T::kThreads) {  // distinct tokens: no two writers
        const int64_t at = int64_t(h.bias[b].token) - slice0;
        if (at >= 0 && at < T::kSlice) s[at] = __fadd_rn(s[at], h.bias[b].bias);
      }
      __syncthreads();
      for (int i = threadIdx.x; i < T::kSlice; i += T::kThreads)
        if (slice0 + i < kVocab) s[i] = h.penalized(s[i], int(slice0 + i), knobs);
    }
    if (allowed) {
      // A word of the mask a thread (the row's bits cross PCIe once, one load per word): its 32
      // elements are written rotated by the lane, so a warp's writes hit 32 distinct banks.
      static_assert(T::kSlice % 32 == 0, "a block's slice starts at a mask word");
      __syncthreads();  // the elements change hands
      const int lane = threadIdx.x % 32;
      for (int w = threadIdx.x; w < T::kSlice / 32; w += T::kThreads) {
        const int64_t v0 = slice0 + int64_t(w) * 32;
        const uint32_t bits = v0 < kVocab ? allowed[v0 / 32] : 0u;
        if (bits == 0xffffffffu) continue;
        for (int j = 0; j < 32; ++j) {
          const int e = (j + lane) % 32;
          if (!((bits >> e) & 1u)) s[w * 32 + e] = -INFINITY;
        }
      }
      __syncthreads();  // and change back
    }
    if (knobs.temperature > 0.0f)
      for (int i = threadIdx.x; i < T::kSlice; i += T::kThreads) s[i] = s[i] / knobs.temperature;
    __syncthreads();
  };
  load_slice();
  const auto real = [&](int j) { return chunk0 + j < kVocab; };
  if (knobs.temperature <= 0.0f) {  // greedy over the adjusted logits: (value, lowest index) as row_argmax
    uint64_t best[1] = {0};
    for (int j = 0; j < T::kPerThread; ++j)
      if (real(j)) {
        const uint64_t k = uint64_t(ordered_key(mine[j])) << 32 | (0xffffffffu - uint32_t(chunk0 + j));
        best[0] = k > best[0] ? k : best[0];
      }
    sd::cluster_reduce<1, true>(best, x, cluster);
    if (cluster.block_rank() == 0 && threadIdx.x == 0) emit(int32_t(0xffffffffu - uint32_t(best[0])));
    cluster.sync();
    return;
  }

  uint64_t mx[1] = {0};
  for (int j = 0; j < T::kPerThread; ++j) mx[0] = max(mx[0], uint64_t(ordered_key(mine[j])));
  sd::cluster_reduce<1, true>(mx, x, cluster);
  const float top = from_ordered_key(uint32_t(mx[0]));

  uint64_t total[1] = {0};  // the row's mass
  for (int j = 0; j < T::kPerThread; ++j) {
    mine[j] = sd::kept_exp(mine[j], top, knobs.min_p);
    total[0] += sd::fixed_mass(mine[j], T::kFixedShift);
  }
  sd::cluster_reduce<1, false>(total, x, cluster);
  const auto key_e = [&](int j) { return __float_as_uint(mine[j]); };  // e >= 0: bits order like values
  const auto mass_e = [&](int j) { return sd::fixed_mass(mine[j], T::kFixedShift); };
  const bool top_k = knobs.top_k > 0 && knobs.top_k < kVocab;
  if (!top_k && knobs.top_p >= 1.0f) {  // no cut: the draw walks the vocabulary in index order
    const int64_t token =
        sd::find_in_index_order<T::kThreads, T::kPerThread>(mass_e, sd::draw_target(knobs, total[0]), x, cluster, chunk0);
    if (cluster.block_rank() == 0 && threadIdx.x == 0) emit(int32_t(token));
    cluster.sync();
    return;
  }

  // A threshold on e whose tokens hold the cut (the top-k set, or the row's top-p prefix) and fit the
  // candidate buffer: 7 fixed depths first, then rounds that split the interval between the lowest
  // threshold known not to hold the cut (hi) and the highest known to hold it (lo) into 8.
  constexpr int kD = T::kDepths;
  const uint64_t need = top_k ? uint64_t(knobs.top_k) : sd::top_p_target(knobs.top_p, total[0]);
  uint32_t lo = 0, hi = __float_as_uint(1.0f) + 1;  // keys of e
  uint64_t held = ~uint64_t(0);                      // tokens with e >= lo
  // (A top-k beyond the buffer never fits: straight to the radix search.)
  const int rounds = top_k && need > uint64_t(T::kCandidates) ? 0 : T::kDepthRounds;
  for (int round = 0; round < rounds; ++round) {
    uint32_t th[kD];
#pragma unroll
    for (int t = 0; t < kD; ++t)
      th[t] = round == 0 ? __float_as_uint(sd::depth_threshold(t)) : lo + uint32_t(uint64_t(hi - lo) * (kD - t) / (kD + 1));
    uint64_t acc[2 * kD] = {};  // [t] tokens with e >= th[t], [kD + t] their mass
    for (int j = 0; j < T::kPerThread; ++j) {
      if (key_e(j) < th[kD - 1]) continue;
      const uint64_t m = mass_e(j);
#pragma unroll
      for (int t = 0; t < kD; ++t)
        if (key_e(j) >= th[t]) acc[t] += 1, acc[kD + t] += m;
    }
    sd::cluster_reduce<2 * kD, false>(acc, x, cluster);
    int depth = kD;
#pragma unroll
    for (int t = kD - 1; t >= 0; --t)
      if ((top_k ? acc[t] : acc[kD + t]) >= need) depth = t;
#pragma unroll
    for (int t = 0; t < kD; ++t) {
      if (t == depth) lo = th[t], held = acc[t];
      if (t == depth - 1) hi = th[t];
    }
    if (held <= uint64_t(T::kCandidates) || hi - lo <= uint32_t(kD)) break;
    if (round == 0 && depth == kD) break;  // the cut reaches below e = 2^-26: a flat row
  }
  if (held <= uint64_t(T::kCandidates)) {
    // Gather the depth's tokens into block 0 (in index order, though the sort makes order moot).
    uint64_t count = 0;
    for (int j = 0; j < T::kPerThread; ++j) count += key_e(j) >= lo;
    uint64_t in_block;
    uint64_t at = block_exclusive_scan<T::kThreads>(count, x.scan, in_block);
    const int phase = x.phase;
    if (threadIdx.x == 0) x.block_part[phase][0] = in_block;
    cluster.sync();
    for (unsigned r = 0; r < cluster.block_rank(); ++r) at += cluster.map_shared_rank(x.block_part[phase], r)[0];
    uint64_t* gather = cluster.map_shared_rank(candidates, 0);
    for (int j = 0; j < T::kPerThread; ++j) {
      if (key_e(j) >= lo) {
        // The slice held it before e.
        const float adjusted = adjusts ? sd::RowHistory<kVocab>(p, knobs).adjusted(logits, int(chunk0 + j), knobs)
                                       : logits[chunk0 + j];
        const float scaled = adjusted / knobs.temperature;
        gather[at++] = uint64_t(ordered_key(scaled)) << 32 | (0xffffffffu - uint32_t(chunk0 + j));
      }
    }
    cluster.sync();  // every candidate has landed; no block touches another's memory after this
    if (cluster.block_rank() != 0) return;
    const int32_t token = sd::draw_from_candidates<T>(candidates, int(held), knobs, top_k, top, total[0], x);
    if (threadIdx.x == 0) emit(token);
    return;
  }

  // The cut overflows the candidate buffer: radix search over the whole row, from the scaled logits.
  load_slice();
  if (top_k) {
    // Keep the top_k by (scaled logit desc, index asc): every key above θ, and the lowest-index ties.
    const auto key = [&](int j) { return ordered_key(mine[j]); };
    const auto one = [&](int j) { return uint64_t(real(j)); };
    uint64_t above;
    const uint32_t theta = sd::radix_search<T::kThreads, T::kPerThread>(key, one, uint64_t(knobs.top_k), above, x, cluster);
    const int64_t last = sd::find_in_index_order<T::kThreads, T::kPerThread>(
        [&](int j) { return uint64_t(real(j) && key(j) == theta); }, uint64_t(knobs.top_k) - above, x, cluster, chunk0);
    for (int j = 0; j < T::kPerThread; ++j)
      if (key(j) < theta || (key(j) == theta && chunk0 + j > last)) mine[j] = -INFINITY;
  }
  uint64_t kept[1] = {0};
  for (int j = 0; j < T::kPerThread; ++j) {
    mine[j] = sd::kept_exp(mine[j], top, knobs.min_p);
    kept[0] += mass_e(j);
  }
  sd::cluster_reduce<1, false>(kept, x, cluster);
  // First element, in (e desc, index asc) order, at which the running mass reaches target; also the
  // mass through it.
  const auto find_by_mass = [&](uint64_t target, uint64_t& through) {
    uint64_t above;
    const uint32_t theta = sd::radix_search<T::kThreads, T::kPerThread>(key_e, mass_e, target, above, x, cluster);
    const uint64_t each = sd::fixed_mass(__uint_as_float(theta), T::kFixedShift);
    const uint64_t ties = (target - above + each - 1) / each;  // >= 1: θ's own mass crosses target
    through = above + ties * each;
    return sd::find_in_index_order<T::kThreads, T::kPerThread>(
        [&](int j) { return uint64_t(key_e(j) == theta); }, ties, x, cluster, chunk0);
  };
  uint64_t mass = kept[0];
  if (knobs.top_p < 1.0f) find_by_mass(sd::top_p_target(knobs.top_p, kept[0]), mass);
  uint64_t through;
  const int64_t token = find_by_mass(sd::draw_target(knobs, mass), through);
  if (cluster.block_rank() == 0 && threadIdx.x == 0) emit(int32_t(token));
  cluster.sync();
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// The launch sample makes, as the plan records it.
template <int B, int kVocab>
constexpr tiling::KernelTiles kSampleTiles = tiling::sample_tiles(kVocab, B);

// Greedy tokens for B rows: one cluster per row streams the logits once.
template <int B, int kVocab>
void argmax(const SampleParams& p, cudaStream_t stream) {
  using T = SampleTraits<kVocab>;
  launch_dependent(argmax_kernel<kVocab>, B * T::kBlocks, T::kThreads, 0, stream, p);
}

// Tokens for B rows with per-row knobs (greedy rows included).
template <int B, int kVocab>
void sample(const SampleParams& p, cudaStream_t stream) {
  using T = SampleTraits<kVocab>;
  static_assert(kSampleTiles<B, kVocab>.grid == B * T::kBlocks && kSampleTiles<B, kVocab>.threads == T::kThreads &&
                    kSampleTiles<B, kVocab>.smem_bytes == T::kSmemBytes,
                "sample: the planned launch differs from this one");
  raise_smem_limit_once<sample_kernel<kVocab>>(T::kSmemBytes);
  launch_dependent(sample_kernel<kVocab>, B * T::kBlocks, T::kThreads, T::kSmemBytes, stream, p);
}

}  // namespace rocket::cuda
