// Token selection on the H200 for the B rows of a decode step: greedy argmax and temperature / top-k /
// top-p sampling, drawing with the host sampler's counter-based generator (kernels/host/sample.h) so a
// seeded request picks the same token on either booster. Per-row knobs come from a device array, so one
// captured graph serves any mix of requests; tokens are written as int32 to device memory or, as the
// engine does, straight to mapped pinned host memory (no copy back after the step).
//
// A row is one cluster of kBlocks blocks; each block owns a contiguous slice of the vocabulary, and a
// thread a contiguous chunk of it (so "index order" is (block, thread, element) order). The sampler
// keeps its slice in shared memory and finds every cut by radix search on 32-bit keys, 4 bits a round:
//   top-k   key = the scaled logit's order-preserving bits, weight 1; ties to the lower index
//   top-p   key = bits of e = exp(s − max) (e >= 0, so bits order like values), weight = e
//   draw    the inverse CDF at u · mass: in (e desc, index asc) order when a cut applies, in vocabulary
//           order when none does, matching the order the host sampler walks
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

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/reduce.cuh"

namespace rocket::cuda {

// One row's request knobs (host SamplingParams plus the draw counter).
struct SampleRow {
  float temperature = 1.0f;  // <= 0: greedy
  float top_p = 1.0f;        // < 1: keep the smallest most-likely prefix with mass >= top_p
  int32_t top_k = 0;         // 0 (or >= vocab): all
  uint32_t reserved = 0;     // keeps seed 8-byte aligned; written as 0
  uint64_t seed = 0;
  uint64_t counter = 0;
};

struct SampleParams {
  const float* logits = nullptr;     // [rows][kVocab]
  const SampleRow* knobs = nullptr;  // [rows]
  int32_t* tokens = nullptr;         // [rows], device or mapped pinned host memory
};

template <int kVocab>
struct SampleTraits {
  static constexpr int kBlocks = 8;  // cluster per row: the portable maximum
  static constexpr int kThreads = 512;
  static constexpr int kWarps = kThreads / 32;
  // Elements per thread, odd so that threads reading their own chunks hit distinct banks.
  static constexpr int kPerThread = ((kVocab + kBlocks * kThreads - 1) / (kBlocks * kThreads)) | 1;
  static constexpr int kSlice = kThreads * kPerThread;  // elements per block
  static constexpr int kSmemBytes = kSlice * 4;
  static constexpr int kDigitBits = 4;                   // radix search: 15 thresholds a round
  static constexpr int kFixedShift = 45;                 // mass = e · 2^45
  static_assert(kVocab % 4 == 0, "argmax reads the row as float4");
  static_assert(uint64_t(kVocab) << kFixedShift < (uint64_t(1) << 63), "fixed-point mass overflows");
  static_assert(kSmemBytes + 4096 <= 227 * 1024, "sample: slice exceeds the H200 per-block shared memory");
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

template <int kThreads>
struct Exchange {
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kMax = 15;
  uint64_t warp_part[kWarps][kMax];
  uint64_t block_part[2][kMax];  // read remotely; alternates so one cluster barrier per reduction suffices
  uint64_t result[kMax];
  int64_t found;  // an index broadcast to the whole cluster
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

template <int kVocab>
__global__ void __cluster_dims__(SampleTraits<kVocab>::kBlocks, 1, 1) __launch_bounds__(SampleTraits<kVocab>::kThreads)
    sample_kernel(const __grid_constant__ SampleParams p) {
  enter_chain();  // dependent_launch.cuh: nothing of the step is touched before this
  using T = SampleTraits<kVocab>;
  namespace sd = sample_detail;
  extern __shared__ float s[];  // [kSlice]: scaled logits, then e; thread t owns [t·kPerThread, +kPerThread)
  __shared__ sd::Exchange<T::kThreads> x;
  const sd::cg::cluster_group cluster = sd::cg::this_cluster();
  if (threadIdx.x == 0) x.phase = 0;
  __syncthreads();
  const int row = blockIdx.x / T::kBlocks;
  const SampleRow knobs = p.knobs[row];
  const float* logits = p.logits + int64_t(row) * kVocab;
  if (knobs.temperature <= 0.0f) {
    const int32_t token = sd::row_argmax<kVocab>(logits, x, cluster);
    if (cluster.block_rank() == 0 && threadIdx.x == 0) p.tokens[row] = token;
    cluster.sync();
    return;
  }
  const int64_t slice0 = int64_t(cluster.block_rank()) * T::kSlice;
  const int64_t chunk0 = slice0 + int64_t(threadIdx.x) * T::kPerThread;
  float* mine = s + threadIdx.x * T::kPerThread;
  for (int i = threadIdx.x; i < T::kSlice; i += T::kThreads)
    s[i] = slice0 + i < kVocab ? __ldcs(logits + slice0 + i) / knobs.temperature : -INFINITY;
  __syncthreads();
  const auto real = [&](int j) { return chunk0 + j < kVocab; };

  uint64_t mx[1] = {0};
  for (int j = 0; j < T::kPerThread; ++j) mx[0] = max(mx[0], uint64_t(ordered_key(mine[j])));
  sd::cluster_reduce<1, true>(mx, x, cluster);
  const float top = from_ordered_key(uint32_t(mx[0]));

  const bool top_k = knobs.top_k > 0 && knobs.top_k < kVocab;
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
  uint64_t total[1] = {0};
  for (int j = 0; j < T::kPerThread; ++j) {
    mine[j] = float(exp(double(mine[j] - top)));  // the host's expf(s - max), correctly rounded
    total[0] += sd::fixed_mass(mine[j], T::kFixedShift);
  }
  sd::cluster_reduce<1, false>(total, x, cluster);

  const auto key_e = [&](int j) { return __float_as_uint(mine[j]); };
  const auto mass_e = [&](int j) { return sd::fixed_mass(mine[j], T::kFixedShift); };
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
  uint64_t mass = total[0];
  if (knobs.top_p < 1.0f) {
    const double need = ceil(double(knobs.top_p) * double(total[0]));
    const uint64_t target = need < 1.0 ? 1 : (need >= double(total[0]) ? total[0] : uint64_t(need));
    find_by_mass(target, mass);
  }
  // Host: u = uniform · mass, the first token with u < running mass. In integers: running mass >= floor(u) + 1.
  const double u = sd::counter_uniform(knobs.seed, knobs.counter) * double(mass);
  const uint64_t target = min(uint64_t(u) + 1, mass);
  int64_t token;
  if (top_k || knobs.top_p < 1.0f) {
    uint64_t through;
    token = find_by_mass(target, through);
  } else {
    token = sd::find_in_index_order<T::kThreads, T::kPerThread>(mass_e, target, x, cluster, chunk0);
  }
  if (cluster.block_rank() == 0 && threadIdx.x == 0) p.tokens[row] = int32_t(token);
  cluster.sync();
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

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
  static bool configured = false;  // NOTE: one attribute call per instantiation, before any capture
  if (!configured) {
    CUDA_CHECK(cudaFuncSetAttribute(sample_kernel<kVocab>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
    configured = true;
  }
  launch_dependent(sample_kernel<kVocab>, B * T::kBlocks, T::kThreads, T::kSmemBytes, stream, p);
}

}  // namespace rocket::cuda
