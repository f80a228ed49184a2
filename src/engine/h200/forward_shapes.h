// What both halves of the H200 forward pass (h200_engine.cu: decode and bucket-sized prefill pieces;
// h200_piece.cu: the token path) share: the kernels' shape types for this chemistry, the state and
// snapshot geometry, and the bucket dispatcher. Included only by the engine's .cu files (needs engine.h).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <iterator>
#include <utility>

#include "cache/layout.h"
#include "core/error.h"
#include "engine.h"  // generated: found through -I ENGINE_DIR
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/gdn.cuh"
#include "kernels/cuda/moe_dispatch.cuh"
#include "kernels/cuda/rope.cuh"

namespace rocket::h200 {

using namespace engine;
using bf16 = __nv_bfloat16;

inline constexpr int64_t kGdnStateFloats = kLinVHeads * kLinKDim * kLinVDim;
inline constexpr int64_t kConvStateFloats = kConvDim * (kConvKernel - 1);
inline constexpr int kQ = int(kHeads * kHeadDim), kKV = int(kKvHeads * kHeadDim);
inline constexpr int64_t kPageElems = int64_t(kKvPageBytes / sizeof(bf16));
inline constexpr KvLayout kKv{.full_layers = kFullLayers, .page_bytes = kKvPageBytes};
inline constexpr SnapshotLayout kSnapshot{.recurrent_bytes = sizeof(float) * kLinearLayers * kGdnStateFloats,
                                          .conv_bytes = sizeof(float) * kLinearLayers * kConvStateFloats};
static_assert(kSnapshot.slot_bytes() == kSnapshotSlotBytes, "the compiler sized the snapshot slots for another state");

using GdnS = cuda::GdnShape<int(kLinKHeads), int(kLinVHeads), int(kLinKDim), int(kLinVDim)>;
using AttnS = cuda::AttentionShape<int(kHeads), int(kKvHeads), int(kHeadDim), int(kRotaryDim), int(kKvPageTokens)>;
using MoeS = cuda::MoeShape<int(kHidden), int(kMoeInter), int(kSharedInter), int(kExperts), int(kTopK)>;

// The largest bucket: the rows of a decode step, and of a bucket-sized prefill piece.
inline constexpr int kMaxBucket = kBuckets[std::size(kBuckets) - 1];

// Calls f.template operator()<B>() for the compiled bucket b.
template <class F>
void with_bucket(int b, F&& f) {
  const bool found = [&]<size_t... I>(std::index_sequence<I...>) {
    return ((kBuckets[I] == b ? (f.template operator()<kBuckets[I]>(), true) : false) || ...);
  }(std::make_index_sequence<std::size(kBuckets)>{});
  CHECK(found, "not a compiled bucket");
}

// The largest bucket <= n (n >= 1; kBuckets[0] == 1).
inline int bucket_at_most(int n) {
  int piece = 1;
  for (int b : kBuckets)
    if (b <= n) piece = b;
  return piece;
}

inline const cuda::RopeTable<int(kRotaryDim)>& rope_table() {
  static const cuda::RopeTable<int(kRotaryDim)> t = cuda::RopeTable<int(kRotaryDim)>::make(kRopeTheta);
  return t;
}

}  // namespace rocket::h200
