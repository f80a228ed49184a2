// MoE router on the H200: per row, softmax over kExperts fp32 logits, the kTopK largest probabilities
// (ties to the lower expert index, descending order as torch.topk returns them), renormalised to sum
// to 1 (host reference: kernels/host/moe.h router_top_k). One warp per row; the logits come from the
// router projection. At small buckets moe_route (moe_dispatch.cuh) runs router_row itself.
#pragma once

#include <cstdint>

#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"
#include "kernels/cuda/primitives/reduce.cuh"

namespace rocket::cuda {

struct RouterParams {
  const float* logits = nullptr;  // [rows][kExperts]
  int32_t* idx = nullptr;         // [rows][kTopK], descending probability
  float* weight = nullptr;        // [rows][kTopK], sums to 1 per row
};

template <int kExperts, int kTopK>
struct RouterTraits {
  static constexpr int kWarps = 4;  // rows per block
};

// ---------------------------------------------------------------------------------------------------
// Device helpers

// One row's routing by one warp: softmax over the row's kExperts fp32 logits l, the kTopK largest
// probabilities, renormalised. Lane 0 writes idx[0..kTopK) and weight[0..kTopK), and the same ids to
// choice[0..kTopK) unless it is null (moe_route keeps them in shared memory for its grouping).
template <int kExperts, int kTopK>
__device__ __forceinline__ void router_row(const float* l, int32_t* idx, float* weight, int* choice, int lane) {
  static_assert(kTopK >= 1 && kTopK <= kExperts, "router top-k needs 1 <= k <= experts");
  constexpr int kPerLane = (kExperts + 31) / 32;
  // Lane holds experts lane, lane + 32, ...: coalesced loads, and a lane's experts ascend with k.
  float v[kPerLane];
  float mx = -INFINITY;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int e = lane + 32 * k;
    v[k] = e < kExperts ? l[e] : -INFINITY;
    mx = fmaxf(mx, v[k]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) sum += lane + 32 * k < kExperts ? expf(v[k] - mx) : 0.0f;
  const float inv = 1.0f / warp_sum(sum);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) v[k] = lane + 32 * k < kExperts ? expf(v[k] - mx) * inv : -1.0f;

  // k rounds of a warp argmax over (probability desc, expert asc); the winner's slot is retired (-1 is
  // below every probability). Probabilities, not logits, are compared, as the host kernel does.
  // NOTE: a round is two redux instructions (the largest probability's bits, then the lowest expert
  // holding it) rather than a five-step shuffle tree of (value, index) pairs: the routing sits on
  // every MoE layer's critical path, and the tree's dependent shuffles were most of its latency.
  float top[kTopK];
  int top_idx[kTopK];
#pragma unroll
  for (int r = 0; r < kTopK; ++r) {
    float best = -1.0f;
    int best_e = kExperts;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      if (v[k] > best) best = v[k], best_e = lane + 32 * k;
    // Probabilities are >= 0, so their bits order as unsigned; a retired or empty lane (-1) is 0.
    const unsigned key = best >= 0.0f ? __float_as_uint(best) + 1u : 0u;
    const unsigned top_key = __reduce_max_sync(0xffffffffu, key);
    best_e = int(__reduce_min_sync(0xffffffffu, unsigned(key == top_key ? best_e : kExperts)));
    best = __uint_as_float(top_key - 1u);
    top[r] = best;
    top_idx[r] = best_e;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      if (lane + 32 * k == best_e) v[k] = -1.0f;
  }
  if (lane == 0) {
    float total = 0.0f;  // summed in rank order, as the host does
#pragma unroll
    for (int r = 0; r < kTopK; ++r) total += top[r];
#pragma unroll
    for (int r = 0; r < kTopK; ++r) {
      idx[r] = top_idx[r];
      weight[r] = top[r] / total;
      if (choice) choice[r] = top_idx[r];
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

template <int kExperts, int kTopK>
__global__ void __launch_bounds__(RouterTraits<kExperts, kTopK>::kWarps * 32)
    router_kernel(const __grid_constant__ RouterParams p, int rows) {
  release_then_wait();  // dependent_launch.cuh: nothing of the step is touched before this
  using T = RouterTraits<kExperts, kTopK>;
  const int row = blockIdx.x * T::kWarps + threadIdx.x / 32;
  if (row >= rows) return;
  router_row<kExperts, kTopK>(p.logits + int64_t(row) * kExperts, p.idx + int64_t(row) * kTopK,
                              p.weight + int64_t(row) * kTopK, nullptr, threadIdx.x % 32);
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// `rows`: the bucket (decode) or the chunk's tokens (prefill).
template <int kExperts, int kTopK>
void router(const RouterParams& p, int rows, cudaStream_t stream) {
  using T = RouterTraits<kExperts, kTopK>;
  CHECK(rows > 0, "router of no rows");
  launch_dependent(router_kernel<kExperts, kTopK>, (rows + T::kWarps - 1) / T::kWarps, T::kWarps * 32, 0, stream, p, rows);
}

}  // namespace rocket::cuda
