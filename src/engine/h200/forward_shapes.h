// What both halves of the qwen3_5_moe forward pass (qwen3_5_moe_step.cu: decode and bucket-sized
// prefill pieces; qwen3_5_moe_piece.cu: the token path) and the runner's state copies share: the
// kernels' shape types for this chemistry, the state and snapshot geometry, and the bucket dispatchers.
// Included only by the engine's .cu files (needs engine.h).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <iterator>
#include <string>
#include <utility>

#include "cache/layout.h"
#include "core/error.h"
#include "engine.h"  // generated: found through -I ENGINE_DIR
#include "engine/h200/arena.h"
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/conv1d.cuh"
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
inline constexpr KvLayout kKv{.full_layers = kKvLayers, .page_bytes = kKvPageBytes};
inline constexpr SnapshotLayout kSnapshot{.recurrent_bytes = sizeof(float) * kLinearLayers * kGdnStateFloats,
                                          .conv_bytes = sizeof(float) * kLinearLayers * kConvStateFloats};
static_assert(kSnapshot.slot_bytes() == kSnapshotSlotBytes, "the compiler sized the snapshot slots for another state");

// A weight's FP8 block scales in the arena (nullptr for the other precisions): both halves of the
// forward pass hand them to their kernels.
template <Precision P>
const float* block_scales(const Arena& a, const LinearAt& w) {
  return P == Precision::kFP8Block ? a.at<const float>(w.scale) : nullptr;
}

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

// The smallest bucket >= n: the bucket a decode of n streams runs.
inline int bucket_at_least(int n) {
  for (int b : kBuckets)
    if (b >= n) return b;
  throw Error("decode: " + std::to_string(n) + " streams exceed the largest compiled bucket " + std::to_string(kMaxStreams));
}

// The largest bucket <= n (n >= 1; kBuckets[0] == 1).
constexpr int bucket_at_most(int n) {
  int piece = 1;
  for (int b : kBuckets)
    if (b <= n) piece = b;
  return piece;
}

inline const cuda::RopeTable<int(kRotaryDim)>& rope_table() {
  static const cuda::RopeTable<int(kRotaryDim)> t = cuda::RopeTable<int(kRotaryDim)>::make(kRopeTheta, kTextMropeSection);
  return t;
}

// The kernels' parameters for layer l over the arena's activation buffers from row r0 on, the same for
// a decode bucket, a bucket-sized prefill piece and the rows of a token-path piece: group i's slot is
// slots[i] (`tokens` rows a group), and for attention row i's position pos[i] and rotary position rope_at[i].
inline cuda::Conv1dParams conv_params(const Arena& a, int l, int64_t r0, const int32_t* slots, int tokens) {
  return {.x = a.at<bf16>(kBuf_mix) + r0 * kConvDim,
          .w = a.at<const bf16>(kLayer[l].gdn.conv),
          .state = a.at<float>(kBuf_conv_state) + kKindSlot[l] * kConvStateFloats,
          .slot_stride = kLinearLayers * kConvStateFloats,
          .slots = slots,
          .out = a.at<bf16>(kBuf_mixc) + r0 * kConvDim,
          .tokens = tokens};
}

inline cuda::GdnParams gdn_params(const Arena& a, int l, const int32_t* slots, int tokens) {
  const GdnAt& G = kLayer[l].gdn;
  return {.qkv = a.at<bf16>(kBuf_mixc),
          .a = a.at<bf16>(kBuf_gdn_a),
          .b = a.at<bf16>(kBuf_gdn_b),
          .z = a.at<bf16>(kBuf_z),
          .a_log = a.at<const bf16>(G.a_log),
          .dt_bias = a.at<const bf16>(G.dt_bias),
          .norm_w = a.at<const bf16>(G.norm),
          .state = a.at<float>(kBuf_gdn_state) + kKindSlot[l] * kGdnStateFloats,
          .slot_stride = kLinearLayers * kGdnStateFloats,
          .slots = slots,
          .out = a.at<bf16>(kBuf_core),
          .tokens = tokens,
          .eps = kNormEps};
}

// `page_table`: the table row 0 reads (a slot's own, or all slots' where slots[] picks the row), each
// slot's `table_width` pages wide.
inline cuda::AttentionParams<AttnS> attention_params(const Arena& a, int l, int64_t r0, const int32_t* page_table,
                                                     int table_width, const int32_t* slots, const int32_t* pos,
                                                     const cuda::RopePosition* rope_at) {
  const AttnAt& A = kLayer[l].attn;
  bf16* kv = a.at<bf16>(kBuf_kv_cache);
  return {.qg = a.at<bf16>(kBuf_mix) + r0 * 2 * kQ,  // per head: query [hd] then gate [hd]
          .k = a.at<bf16>(kBuf_k) + r0 * kKV,
          .v = a.at<bf16>(kBuf_v) + r0 * kKV,
          .q_norm = a.at<const bf16>(A.q_norm),
          .k_norm = a.at<const bf16>(A.k_norm),
          .k_cache = kv + kKv.offset(0, kKindSlot[l], 0) / sizeof(bf16),
          .v_cache = kv + kKv.offset(0, kKindSlot[l], 1) / sizeof(bf16),
          .page_stride = int64_t(kKv.cache_page_bytes() / sizeof(bf16)),
          .page_table = page_table,
          .table_width = table_width,
          .slots = slots,
          .pos = pos,
          .rope_at = rope_at,
          .partial = a.at<float>(kBuf_attn_partial),
          .out = a.at<bf16>(kBuf_core) + r0 * kQ,
          .eps = kNormEps,
          .rope = rope_table()};
}

}  // namespace rocket::h200
