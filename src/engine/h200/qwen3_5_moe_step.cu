// The qwen3_5_moe decode step and bucket-sized prefill pieces on the H200 (qwen3_5_moe_forward.h): the
// host engine's sequence over a bucket's rows, one kernel (or two) per op, with the kernels the compiler
// planned for each bucket.
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "engine/h200/forward_shapes.h"
#include "engine/h200/qwen3_5_moe_forward.h"
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/conv1d.cuh"
#include "kernels/cuda/dense.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/gdn.cuh"
#include "kernels/cuda/moe_dispatch.cuh"
#include "kernels/cuda/moe_experts.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/sample.cuh"

namespace rocket {

using namespace engine;
using bf16 = __nv_bfloat16;

namespace {

using namespace h200;

// The precisions the h200 kernels run (compiler/precision_map.cc refuses the others for this booster):
// projections bf16 or block FP8, routed experts also NVFP4; the embedding (a gather) and the shared
// expert's gate (a dot product, moe_shared_gate.cuh) bf16.
constexpr bool dense_precision(Precision p) { return p == Precision::kBF16 || p == Precision::kFP8Block; }
static_assert(kPrecisionEmbed == Precision::kBF16 && kPrecisionSharedExpertGate == Precision::kBF16,
              "h200 engine: the embedding and the shared expert's gate are bf16");
static_assert(dense_precision(kPrecisionLmHead) && dense_precision(kPrecisionAttnProj) && dense_precision(kPrecisionGdnProj) &&
                  dense_precision(kPrecisionGdnGate) && dense_precision(kPrecisionRouter) &&
                  dense_precision(kPrecisionSharedExpert),
              "h200 engine: projections are bf16 or block FP8");
static_assert(dense_precision(kPrecisionExperts) || kPrecisionExperts == Precision::kNVFP4,
              "h200 engine: routed experts are bf16, block FP8 or nvfp4");
// GDN's in_proj b and a ride in qkv|z's launch when they share its precision (-FP8 releases keep them
// bf16: then they are a launch of their own, the plan's dense_gdn_gate).
constexpr bool kGdnGateApart = kPrecisionGdnGate != kPrecisionGdnProj;
static_assert(kBuckets[0] == 1, "prefill pieces need a bucket of 1 to cover any chunk length");
// The largest bucket-sized prefill piece: the largest bucket below the token path's minimum (a bucket
// of 64 decodes 64 streams, but a piece of 64 rows takes the token path). The GDN and conv prefill
// kernels are sized for it.
constexpr int kMaxBucketPiece = bucket_at_most(Qwen35MoeForward::kTokenPieceMin - 1);
static_assert(kKvPageBytes >= uint64_t(kKvPageTokens) * kKV * sizeof(bf16) && kPageElems % 8 == 0);
static_assert(kBufBytes_logits >= uint64_t(kLogitRows) * kVocab * 4 && kLogitRows >= kMaxBucket);
static_assert(kBufBytes_router >= uint64_t(kMaxRows) * kExperts * 4);
static_assert(kBufBytes_mix >= uint64_t(kMaxRows) * (kConvDim > 2 * kQ ? kConvDim : 2 * kQ) * 2);
static_assert(kBufBytes_core >= uint64_t(kMaxRows) * (kValueDim > kQ ? kValueDim : kQ) * 2);
static_assert(kBufBytes_hn >= uint64_t(kMaxRows) * kHidden * 2 && kMaxRows >= 8);

// The kernels this engine launches at bucket kBuckets[I] are the ones the compiler planned
// (plan.kernels, engine.h kKernel_*: the same names and shapes as compiler/kernel_selection.cc), and
// their workspaces fit the plan's buffers, which the compiler sized from the same tiling.
template <size_t I>
struct KernelsAsPlanned {
  static constexpr int B = kBuckets[I];
  using GU = cuda::MoeGateUpTraits<MoeS, B, kPrecisionExperts, kPrecisionSharedExpert>;
  using Down = cuda::MoeDownTraits<MoeS, B, kPrecisionExperts, kPrecisionSharedExpert>;
#ifdef ROCKET_KERNEL_dense_gdn_gate
  static_assert(kGdnGateApart, "the plan launches GDN's b|a apart, this engine's precisions do not");
  static_assert(cuda::kDenseTiles<kPrecisionGdnProj, int(kHidden), B, int(kConvDim), int(kValueDim)> == kKernel_dense_gdn_in[I],
                "dense_gdn_in differs from the plan's");
  static_assert(cuda::kDenseTiles<kPrecisionGdnGate, int(kHidden), B, int(kLinVHeads), int(kLinVHeads)> == kKernel_dense_gdn_gate[I],
                "dense_gdn_gate differs from the plan's");
#else
  static_assert(!kGdnGateApart, "this engine launches GDN's b|a apart, the plan does not");
  static_assert(cuda::kDenseTiles<kPrecisionGdnProj, int(kHidden), B, int(kConvDim), int(kValueDim), int(kLinVHeads),
                                  int(kLinVHeads)> == kKernel_dense_gdn_in[I],
                "dense_gdn_in differs from the plan's");
#endif
  static_assert(cuda::GdnDecodeTiling<GdnS, B>::kTiles == kKernel_gdn_decode[I], "gdn_decode differs from the plan's");
  static_assert(cuda::kDenseTiles<kPrecisionGdnProj, int(kValueDim), B, int(kHidden)> == kKernel_dense_gdn_out[I],
                "dense_gdn_out differs from the plan's");
  static_assert(cuda::kDenseTiles<kPrecisionAttnProj, int(kHidden), B, 2 * kQ, kKV, kKV> == kKernel_dense_attn_qkv[I],
                "dense_attn_qkv differs from the plan's");
  static_assert(cuda::AttentionTiles<AttnS, B>::kTiles == kKernel_attention_decode[I], "attention_decode differs from the plan's");
  static_assert(cuda::kDenseTiles<kPrecisionAttnProj, kQ, B, int(kHidden)> == kKernel_dense_attn_o[I], "dense_attn_o differs from the plan's");
  static_assert(cuda::kDenseTiles<kPrecisionRouter, int(kHidden), B, int(kExperts)> == kKernel_dense_router[I],
                "dense_router differs from the plan's");
  static_assert(cuda::MoeDispatchTraits<MoeS, B>::kTiles == kKernel_moe_route[I], "moe_route differs from the plan's");
  static_assert(GU::kTiling.tiles_of() == kKernel_moe_gate_up[I], "moe_gate_up differs from the plan's");
  static_assert(Down::kTiling.tiles_of() == kKernel_moe_down[I], "moe_down differs from the plan's");
  static_assert(cuda::kDenseTiles<kPrecisionLmHead, int(kHidden), B, int(kVocab)> == kKernel_dense_lm_head[I],
                "dense_lm_head differs from the plan's");
  static_assert(cuda::kSampleTiles<B, int(kVocab)> == kKernel_sample[I], "sample differs from the plan's");

  static_assert(cuda::AttentionTiles<AttnS, B>::kPartialFloats * 4 <= int64_t(kBufBytes_attn_partial) &&
                    sizeof(cuda::MoeRoute<MoeS, B>) <= kBufBytes_moe_route &&
                    uint64_t(GU::kPartialFloats) * 4 <= kBufBytes_moe_partial &&
                    uint64_t(GU::kArrivals) * 4 <= kBufBytes_moe_arrivals &&
                    uint64_t(B) * kTopK * kMoeInter * 2 <= kBufBytes_moe_act &&
                    uint64_t(B) * kSharedInter * 2 <= kBufBytes_shared_act && uint64_t(B) * 4 <= kBufBytes_shared_scale,
                "a kernel workspace exceeds its plan buffer: the compiler's memory map and the kernels disagree");
  static constexpr bool kChecked = true;
};
static_assert([]<size_t... I>(std::index_sequence<I...>) { return (KernelsAsPlanned<I>::kChecked && ...); }(
    std::make_index_sequence<std::size(kBuckets)>{}));
static_assert(kBoosterLimits == cuda::kBooster, "the kernels are tiled for the plan's booster");

}  // namespace

Qwen35MoeForward::Qwen35MoeForward(H200Runner& runner)
    : run_(runner),
      act_{.x = runner.buf<bf16>(kBuf_x),
           .hn = runner.buf<bf16>(kBuf_hn),
           .mix = runner.buf<bf16>(kBuf_mix),
           .mixc = runner.buf<bf16>(kBuf_mixc),
           .z = runner.buf<bf16>(kBuf_z),
           .gdn_a = runner.buf<bf16>(kBuf_gdn_a),
           .gdn_b = runner.buf<bf16>(kBuf_gdn_b),
           .core = runner.buf<bf16>(kBuf_core),
           .k = runner.buf<bf16>(kBuf_k),
           .v = runner.buf<bf16>(kBuf_v),
           .attn_out = runner.buf<bf16>(kBuf_attn_out),
           .moe_out = runner.buf<bf16>(kBuf_moe_out),
           .router = runner.buf<float>(kBuf_router),
           .logits = runner.buf<float>(kBuf_logits)} {}

void Qwen35MoeForward::fuelled() {
  CUDA_CHECK(cudaMemsetAsync(run_.buf<int>(kBuf_moe_arrivals), 0, kBufBytes_moe_arrivals, run_.stream()));  // the kernel's contract
}

// NOTE: prefill before decode, as the engine's single file once instantiated them: the kernels then
// come out of nvcc in the same order, so this file's cubin is byte-identical to that file's.
void Qwen35MoeForward::enqueue_prefill(int b, int slot, bool logits) {
  CHECK(b <= kMaxBucketPiece, "a bucket-sized prefill piece of " + std::to_string(b) + " rows: the token path takes " +
                                  std::to_string(kTokenPieceMin) + " and more");
  with_bucket(b, [&]<int B>() {
    if constexpr (B <= kMaxBucketPiece) prefill_step<B>(slot, logits);
  });
}

void Qwen35MoeForward::enqueue_decode(int b, uint32_t kinds, int logits_row) {
  with_bucket(b, [&]<int B>() { decode_step<B>(kinds, logits_row); });
}

void Qwen35MoeForward::pick_tokens(std::span<const SamplingKnobs* const> knobs, int logits_row) {
  const int rows = int(knobs.size()), b = bucket_at_least(rows);
  H200Runner::StepInputs& s = run_.staging();
  for (int i = 0; i < b; ++i) s.sample[i] = i < rows ? run_.staged_knobs(knobs[size_t(i)], i) : SamplingKnobs{.temperature = 0.0f};
  run_.upload_step();
  enqueue_decode(b, kKindSampling, logits_row);
}

// ---------------------------------------------------------------------------------------------------
// The forward pass: the host engine's sequence, one kernel (or two) per op.

namespace {

// A weight of precision P in the arena, as the dense kernels take it (its FP8 block scales:
// forward_shapes.h block_scales).
template <Precision P>
cuda::DenseWeight<P> dense_weight(const Arena& a, const LinearAt& w) {
  return a.at<std::remove_pointer_t<cuda::DenseWeight<P>>>(w.weight);
}

// x_rows: rows of x the kernel may read (dense.cuh, DenseParams::x_rows); 0: rows.
template <int N, int K, int B, Precision P, typename Out>
void project(const Arena& a, const LinearAt& w, const bf16* x, Out* y, int rows, cudaStream_t s, int x_rows = 0) {
  cuda::dense<N, K, B, Out, P>(
      {.w = dense_weight<P>(a, w), .x = x, .y = y, .rows = rows, .x_rows = x_rows, .scale = block_scales<P>(a, w)}, s);
}

}  // namespace

template <int B, bool kPrefill>
void Qwen35MoeForward::enqueue_layers(uint32_t kinds, int slot) {
  const H200Runner::StepInputs* in = run_.buf<H200Runner::StepInputs>(kBuf_step_inputs);
  const bool norm = kinds & kKindNorm;
  auto add_norm = [&](const bf16* delta, uint64_t w) {
    if (norm)
      cuda::add_rms_norm<int(kHidden)>(
          {.x = act_.x, .delta = delta, .residual = act_.x, .w = weight<bf16>(w), .y = act_.hn, .eps = kNormEps}, B, run_.stream());
  };
  // Decode: the embedding reads the step's inputs from the pinned staging and lands them in
  // step_inputs for the kernels after it; prefill copies them before its pieces (upload_step).
  static_assert(sizeof(H200Runner::StepInputs) % 16 == 0);
  cuda::EmbeddingParams embed{.table = weight<bf16>(kEmbed.weight), .ids = in->ids, .x = act_.x};
  if constexpr (kPrefill) embed.image_rows = image_rows();  // a prompt's image tokens (decode ids are never negative)
  if constexpr (!kPrefill) {
    embed.ids = run_.host_step()->ids;
    embed.inputs_from = reinterpret_cast<const uint4*>(run_.host_step());
    embed.inputs_to = run_.buf<uint4>(kBuf_step_inputs);
    embed.input_vectors = int(sizeof(H200Runner::StepInputs) / 16);
  }
  if (norm) cuda::embedding<int(kHidden)>(embed, B, run_.stream());
  for (int l = 0; l < kLayers; ++l) {
    if (l == 0) {
      if (norm)
        cuda::rms_norm<int(kHidden)>({.x = act_.x, .w = weight<bf16>(kLayer[0].input_norm), .y = act_.hn, .eps = kNormEps}, B,
                                     run_.stream());
    } else {
      add_norm(act_.moe_out, kLayer[l].input_norm);
    }
    run_.mark(StepGroup::kNorm);
    if (kIsFull[l]) attention_layer<B, kPrefill>(l, kinds, slot);
    else gdn_layer<B, kPrefill>(l, kinds);
    add_norm(act_.attn_out, kLayer[l].post_norm);
    run_.mark(StepGroup::kNorm);
    moe_block<B>(l, kinds);
    run_.mark(StepGroup::kMoe);
  }
  add_norm(act_.moe_out, kFinalNorm);
  run_.mark(StepGroup::kNorm);
}

template <int B, bool kPrefill>
void Qwen35MoeForward::gdn_layer(int l, uint32_t kinds) {
  const GdnAt& G = kLayer[l].gdn;
  const H200Runner::StepInputs* in = run_.buf<H200Runner::StepInputs>(kBuf_step_inputs);
  if (kinds & kKindDense) {
    // One launch for the four projections of hn: b and a (2 tiles each) ride in qkv|z's waves, unless
    // their precision differs.
    constexpr Precision P = kPrecisionGdnProj, PG = kPrecisionGdnGate;
    const Arena& a = run_.arena();
    if constexpr (!kGdnGateApart) {
      cuda::dense_group<P, int(kHidden), B, bf16, int(kConvDim), int(kValueDim), int(kLinVHeads), int(kLinVHeads)>(
          {.w = {dense_weight<P>(a, G.qkv), dense_weight<P>(a, G.z), dense_weight<P>(a, G.b), dense_weight<P>(a, G.a)},
           .x = act_.hn,
           .y = {act_.mix, act_.z, act_.gdn_b, act_.gdn_a},
           .rows = B,
           .scale = {block_scales<P>(a, G.qkv), block_scales<P>(a, G.z), block_scales<P>(a, G.b), block_scales<P>(a, G.a)}},
          run_.stream());
    } else {
      cuda::dense_group<P, int(kHidden), B, bf16, int(kConvDim), int(kValueDim)>(
          {.w = {dense_weight<P>(a, G.qkv), dense_weight<P>(a, G.z)},
           .x = act_.hn,
           .y = {act_.mix, act_.z},
           .rows = B,
           .scale = {block_scales<P>(a, G.qkv), block_scales<P>(a, G.z)}},
          run_.stream());
      cuda::dense_group<PG, int(kHidden), B, bf16, int(kLinVHeads), int(kLinVHeads)>(
          {.w = {dense_weight<PG>(a, G.b), dense_weight<PG>(a, G.a)},
           .x = act_.hn,
           .y = {act_.gdn_b, act_.gdn_a},
           .rows = B,
           .scale = {block_scales<PG>(a, G.b), block_scales<PG>(a, G.a)}},
          run_.stream());
    }
  }
  run_.mark(StepGroup::kDense);
  if (kinds & kKindGdn) {
    const cuda::Conv1dParams cp = conv_params(run_.arena(), l, 0, in->slots, kPrefill ? B : 1);
    const cuda::GdnParams gp = gdn_params(run_.arena(), l, in->slots, kPrefill ? B : 1);
    if constexpr (kPrefill) {
      cuda::conv1d_prefill<kMaxBucketPiece, int(kConvDim), int(kConvKernel)>(cp, run_.stream());
      cuda::gdn_prefill<GdnS, kMaxBucketPiece>(gp, run_.stream());
    } else {
      cuda::conv1d_decode<B, int(kConvDim), int(kConvKernel)>(cp, run_.stream());
      cuda::gdn_decode<GdnS, B>(gp, run_.stream());
    }
  }
  run_.mark(StepGroup::kGdn);
  if (kinds & kKindDense)
    project<int(kHidden), int(kValueDim), B, kPrecisionGdnProj>(run_.arena(), G.out, act_.core, act_.attn_out, B, run_.stream());
  run_.mark(StepGroup::kDense);
}

template <int B, bool kPrefill>
void Qwen35MoeForward::attention_layer(int l, uint32_t kinds, int slot) {
  const AttnAt& A = kLayer[l].attn;
  const H200Runner::StepInputs* in = run_.buf<H200Runner::StepInputs>(kBuf_step_inputs);
  if (kinds & kKindDense) {
    // One launch for q|gate (into mix: per head, query [hd] then gate [hd]), k and v (k and v are 32 tiles
    // each: latency bound on their own).
    constexpr Precision P = kPrecisionAttnProj;
    const Arena& a = run_.arena();
    cuda::dense_group<P, int(kHidden), B, bf16, 2 * kQ, kKV, kKV>(
        {.w = {dense_weight<P>(a, A.q), dense_weight<P>(a, A.k), dense_weight<P>(a, A.v)},
         .x = act_.hn,
         .y = {act_.mix, act_.k, act_.v},
         .rows = B,
         .scale = {block_scales<P>(a, A.q), block_scales<P>(a, A.k), block_scales<P>(a, A.v)}},
        run_.stream());
  }
  run_.mark(StepGroup::kDense);
  if (kinds & kKindAttention) {
    const int32_t* table = run_.buf<int32_t>(kBuf_page_tables) + (kPrefill ? int64_t(slot) * H200Runner::kPagesPerStream : 0);
    const cuda::AttentionParams<AttnS> p =
        attention_params(run_.arena(), l, 0, table, H200Runner::kPagesPerStream, in->slots, in->pos, in->rope);
    if constexpr (kPrefill) cuda::attention_prefill<AttnS, B>(p, run_.stream());
    else cuda::attention_decode<AttnS, B>(p, run_.stream());
  }
  run_.mark(StepGroup::kAttention);
  if (kinds & kKindDense) project<int(kHidden), kQ, B, kPrecisionAttnProj>(run_.arena(), A.o, act_.core, act_.attn_out, B, run_.stream());
  run_.mark(StepGroup::kDense);
}

template <int B>
void Qwen35MoeForward::moe_block(int l, uint32_t kinds) {
  if (!(kinds & kKindMoe)) return;
  const LayerAt& L = kLayer[l];
  int32_t* idx = run_.buf<int32_t>(kBuf_route_idx);
  float* w = run_.buf<float>(kBuf_route_w);
  auto* route = run_.buf<cuda::MoeRoute<MoeS, B>>(kBuf_moe_route);
  const uint8_t* experts = weight<uint8_t>(L.experts);
  constexpr Precision PS = kPrecisionSharedExpert;
  const Arena& a = run_.arena();
  project<int(kExperts), int(kHidden), B, kPrecisionRouter, float>(a, L.router, act_.hn, act_.router, B, run_.stream());
  cuda::moe_route<MoeS, B>({.logits = act_.router, .idx = idx, .weight = w, .route = route}, run_.stream());
  cuda::moe_gate_up<MoeS, B, kPrecisionExperts, PS>({.x = act_.hn,
                                                     .route = route,
                                                     .experts = experts,
                                                     .expert_stride = kExpertStride,
                                                     .expert = kExpert,
                                                     .shared_gate = weight<uint8_t>(L.shared_gate.weight),
                                                     .shared_up = weight<uint8_t>(L.shared_up.weight),
                                                     .shared_expert_gate = weight<bf16>(L.shared_expert_gate.weight),
                                                     .act = run_.buf<bf16>(kBuf_moe_act),
                                                     .shared_act = run_.buf<bf16>(kBuf_shared_act),
                                                     .shared_scale = run_.buf<float>(kBuf_shared_scale),
                                                     .partial = run_.buf<float>(kBuf_moe_partial),
                                                     .arrivals = run_.buf<int>(kBuf_moe_arrivals),
                                                     .shared_gate_block_scale = block_scales<PS>(a, L.shared_gate),
                                                     .shared_up_block_scale = block_scales<PS>(a, L.shared_up)},
                                                    run_.stream());
  cuda::moe_down<MoeS, B, kPrecisionExperts, PS>({.route = route,
                                                  .route_weight = w,
                                                  .experts = experts,
                                                  .expert_stride = kExpertStride,
                                                  .expert = kExpert,
                                                  .shared_down = weight<uint8_t>(L.shared_down.weight),
                                                  .act = run_.buf<bf16>(kBuf_moe_act),
                                                  .shared_act = run_.buf<bf16>(kBuf_shared_act),
                                                  .shared_scale = run_.buf<float>(kBuf_shared_scale),
                                                  .out = act_.moe_out,
                                                  .shared_down_block_scale = block_scales<PS>(a, L.shared_down)},
                                                 run_.stream());
}

template <int B>
void Qwen35MoeForward::decode_step(uint32_t kinds, int logits_row) {
  const H200Runner::StepInputs* in = run_.buf<H200Runner::StepInputs>(kBuf_step_inputs);
  enqueue_layers<B, false>(kinds, -1);
  float* logits = act_.logits + int64_t(logits_row) * kVocab;
  // Every mma column reads a row of hn (its kMaxRows rows are all readable; the extra products are
  // discarded): faster below 8 live rows (dense.cuh, DenseParams::x_rows).
  if (kinds & kKindLmHead)
    project<int(kVocab), int(kHidden), B, kPrecisionLmHead, float>(run_.arena(), kLmHead, act_.hn, logits, B, run_.stream(), int(kMaxRows));
  run_.mark(StepGroup::kLmHead);
  if (kinds & kKindSampling)
    cuda::sample<B, int(kVocab)>({.logits = logits,
                                  .knobs = in->sample,
                                  .tokens = run_.host_tokens(),
                                  .counts = run_.buf<int32_t>(kBuf_history_counts),
                                  .prompt = run_.buf<uint32_t>(kBuf_history_prompt),
                                  .bias = run_.buf<LogitBias>(kBuf_history_bias),
                                  .mask = run_.host_masks()},
                                 run_.stream());
  run_.mark(StepGroup::kSampling);
}

template <int B>
void Qwen35MoeForward::prefill_step(int slot, bool logits) {
  enqueue_layers<B, true>(kKindAll, slot);
  if (logits)
    project<int(kVocab), int(kHidden), B, kPrecisionLmHead, float>(run_.arena(), kLmHead, act_.hn, act_.logits, B, run_.stream());
}

}  // namespace rocket
