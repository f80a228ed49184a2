// MoE dispatch on the H200: from the router's top-k choices of B token rows, the per-expert row lists
// the grouped expert kernels (moe_experts.cuh) walk. Exactly the routed rows, no padding: slot s of
// B * top_k is one (row, choice) pair, slots are grouped by expert in ascending expert order and, within
// an expert, in ascending row order, so the layout is a pure function of the choices (deterministic).
//
// One block of one small kernel; its grid never depends on the routing, so it is graph-capturable and
// the number of active experts is read by the next kernels from device memory. moe_route is what the
// engine calls: router (router.cuh) then grouping, as one kernel up to kRouteRows rows (a step at a
// small bucket is latency-bound, and a kernel boundary costs ~1 us per layer), as two above (one
// block routing 32 rows is issue-bound on its SM: measured slower at bucket 32, and at 16 rows too,
// 5.29-5.38 against 5.25-5.29 ms per step, h200-a3b.md History 03:58Z and 04:08Z). NOTE: no kernel
// at all, each moe_gate_up warp grouping the choices itself, was slower still (bucket 16 5.76 ms:
// the redundant derivation costs gate_up more issue than this kernel's launch costs; History 06:10Z).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"
#include "kernels/cuda/router.cuh"
#include "kernels/tiling/moe.h"

namespace rocket::cuda {

// The MoE shapes of one chemistry (engine.h constants), as the traits type every MoE kernel takes.
// NOTE: a type rather than a struct value as template argument: nvcc 13's host stubs cannot spell
// class-type non-type template arguments of __global__ functions.
template <int Hidden, int Inter, int SharedInter, int Experts, int TopK>
struct MoeShape {
  static constexpr int kHidden = Hidden, kInter = Inter, kSharedInter = SharedInter;
  static constexpr int kExperts = Experts, kTopK = TopK;
  static constexpr tiling::MoeDims kDims{Hidden, Inter, SharedInter, Experts, TopK};
};

// Written by moe_dispatch, read by the expert kernels. Entry a < active is one expert with rows.
template <class D, int B>
struct MoeRoute {
  static constexpr tiling::MoeRouteLayout kLayout = tiling::moe_route_layout(D::kDims, B);
  static constexpr int kSlots = kLayout.slots;
  static constexpr int kMaxActive = kLayout.max_active;
  int active;                 // experts with at least one routed row this step
  int expert[kMaxActive];     // ascending expert ids
  int start[kMaxActive + 1];  // entry a owns slots [start[a], start[a + 1]); start[active] = kSlots
  int slot_row[kSlots];       // token row of each slot
  int slot_of[kSlots];        // slot of (row b, choice t) at [b * top_k + t]
};

template <class D, int B>
struct MoeDispatchParams {
  const int* idx = nullptr;  // [B][top_k] router choices, each in [0, experts)
  MoeRoute<D, B>* route = nullptr;
};

template <class D, int B>
struct MoeRouteParams {
  const float* logits = nullptr;  // [B][experts] router logits
  int32_t* idx = nullptr;         // [B][top_k] out: router choices, descending probability
  float* weight = nullptr;        // [B][top_k] out: renormalised router weights (moe_down reads them)
  MoeRoute<D, B>* route = nullptr;
};

template <class D, int B>
struct MoeDispatchTraits {
  static constexpr tiling::MoeDispatchTiling kTiling = tiling::moe_dispatch_tiling(D::kDims, B);
  static constexpr tiling::KernelTiles kTiles = tiling::moe_route_tiles(D::kDims, B);
  static constexpr int kRouteRows = kTiling.route_rows;  // moe_route: one kernel up to this many rows, one row per warp
  static constexpr int kSlots = kTiling.slots;
  static constexpr int kWidest = kTiling.widest;
  // One thread per slot and per expert; when routing here, also one warp per row.
  static constexpr int kGroupThreads = kTiling.group_threads;
  static constexpr int kRouteThreads = kTiling.route_threads;
  static constexpr int kThreads = kTiling.threads;
  static constexpr int kWarps = kTiling.warps;
  static_assert(kThreads <= 1024, "moe dispatch: one block holds every slot and every expert");
  static_assert(kSlots < (1 << 16), "moe dispatch: counts and active flags share one scanned int");
};
static_assert(sizeof(MoeRoute<MoeShape<8, 16, 16, 4, 2>, 3>) == 4 * MoeRoute<MoeShape<8, 16, 16, 4, 2>, 3>::kLayout.ints(),
              "moe route: the tiling's layout differs from the struct");

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

namespace moe {

// The grouping, by the whole block: thread tid < kSlots holds e, the expert of slot (row tid / top_k,
// choice tid % top_k); every other thread holds -1.
template <class D, int B>
__device__ __forceinline__ void group_slots(int e, MoeRoute<D, B>* route) {
  using T = MoeDispatchTraits<D, B>;
  __shared__ int warp_count[T::kWarps][D::kExperts];  // slots of each expert per warp, then their prefix
  __shared__ int scan_total[T::kWarps];
  __shared__ int expert_start[D::kExperts];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < T::kWarps * D::kExperts; i += T::kThreads) (&warp_count[0][0])[i] = 0;
  __syncthreads();

  // Rank of this slot among earlier slots of its warp that chose the same expert.
  const unsigned peers = __match_any_sync(0xffffffffu, e);
  const int rank_in_warp = __popc(peers & ((1u << lane) - 1u));
  if (e >= 0 && rank_in_warp == 0) warp_count[warp][e] = __popc(peers);
  __syncthreads();

  // Per expert: prefix over warps (slot order within an expert = row order), then a block scan over
  // experts of (count | active << 16) giving each expert's first slot and its entry index.
  int packed = 0;
  if (tid < D::kExperts) {
    int run = 0;
    for (int w = 0; w < T::kWarps; ++w) {
      const int c = warp_count[w][tid];
      warp_count[w][tid] = run;
      run += c;
    }
    packed = run | (run > 0 ? 1 << 16 : 0);
  }
  int inclusive = packed;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += v;
  }
  if (lane == 31) scan_total[warp] = inclusive;
  __syncthreads();
  for (int w = 0; w < warp; ++w) inclusive += scan_total[w];
  const int exclusive = inclusive - packed;
  if (tid < D::kExperts) {
    expert_start[tid] = exclusive & 0xffff;
    if (packed) {
      route->expert[exclusive >> 16] = tid;
      route->start[exclusive >> 16] = exclusive & 0xffff;
    }
    if (tid == D::kExperts - 1) {
      route->active = inclusive >> 16;
      route->start[inclusive >> 16] = T::kSlots;
    }
  }
  __syncthreads();

  if (e >= 0) {
    const int slot = expert_start[e] + warp_count[warp][e] + rank_in_warp;
    route->slot_row[slot] = tid / D::kTopK;
    route->slot_of[tid] = slot;
  }
}

}  // namespace moe

template <class D, int B>
__global__ void __launch_bounds__(MoeDispatchTraits<D, B>::kThreads)
    moe_dispatch_kernel(const __grid_constant__ MoeDispatchParams<D, B> p) {
  release_then_wait();  // dependent_launch.cuh: nothing of the step is touched before this
  const int tid = threadIdx.x;
  moe::group_slots<D, B>(tid < MoeDispatchTraits<D, B>::kSlots ? p.idx[tid] : -1, p.route);
}

// Router and grouping in one block (B <= kRouteRows): warp w routes row w, keeping the choices in
// shared memory for the grouping.
template <class D, int B>
__global__ void __launch_bounds__(MoeDispatchTraits<D, B>::kThreads)
    moe_route_kernel(const __grid_constant__ MoeRouteParams<D, B> p) {
  using T = MoeDispatchTraits<D, B>;
  release_then_wait();
  __shared__ int choice[T::kSlots];
  const int tid = threadIdx.x, warp = tid / 32;
  if (warp < B)
    router_row<D::kExperts, D::kTopK>(p.logits + int64_t(warp) * D::kExperts, p.idx + warp * D::kTopK,
                                      p.weight + warp * D::kTopK, choice + warp * D::kTopK, tid % 32);
  __syncthreads();
  moe::group_slots<D, B>(tid < T::kSlots ? choice[tid] : -1, p.route);
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// REQUIRES: idx and route device pointers; every idx in [0, experts) (the router's top-k guarantees it).
template <class D, int B>
void moe_dispatch(const MoeDispatchParams<D, B>& p, cudaStream_t stream) {
  launch_dependent(moe_dispatch_kernel<D, B>, 1, MoeDispatchTraits<D, B>::kThreads, 0, stream, p);
}

// The MoE block's routing of B rows: choices and weights (idx, weight) and the route.
// REQUIRES: device pointers; finite logits.
template <class D, int B>
void moe_route(const MoeRouteParams<D, B>& p, cudaStream_t stream) {
  using T = MoeDispatchTraits<D, B>;
  if constexpr (B <= T::kRouteRows) {
    launch_dependent(moe_route_kernel<D, B>, 1, T::kThreads, 0, stream, p);
  } else {
    router<D::kExperts, D::kTopK>({.logits = p.logits, .idx = p.idx, .weight = p.weight}, B, stream);
    moe_dispatch<D, B>({.idx = p.idx, .route = p.route}, stream);
  }
}

}  // namespace rocket::cuda
