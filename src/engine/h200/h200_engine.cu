#include "engine/h200/h200_engine.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "cache/layout.h"
#include "engine/h200/forward_shapes.h"
#include "engine/h200/device_budget.h"
#include "engine/upright.h"
#include "kernels/host/sample.h"
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/conv1d.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/gemm.cuh"
#include "kernels/cuda/dense.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/gdn.cuh"
#include "kernels/cuda/moe_dispatch.cuh"
#include "kernels/cuda/moe_experts.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/sample.cuh"

namespace fs = std::filesystem;

namespace rocket {

using namespace engine;
using bf16 = __nv_bfloat16;

namespace {

using namespace h200;

// The h200 engine has bf16 dense kernels: every fuel it runs (bf16, ModelOpt NVFP4) keeps the dense
// roles in bf16, and the compiler refuses other formats for this booster.
static_assert(kPrecisionEmbed == Precision::kBF16 && kPrecisionLmHead == Precision::kBF16 &&
                  kPrecisionAttnProj == Precision::kBF16 && kPrecisionGdnProj == Precision::kBF16 &&
                  kPrecisionGdnGate == Precision::kBF16 && kPrecisionRouter == Precision::kBF16 &&
                  kPrecisionSharedExpert == Precision::kBF16 && kPrecisionSharedExpertGate == Precision::kBF16,
              "h200 engine: dense roles must be bf16");
static_assert(kPrecisionExperts == Precision::kBF16 || kPrecisionExperts == Precision::kNVFP4,
              "h200 engine: routed experts are bf16 or nvfp4");
static_assert(kBuckets[0] == 1, "prefill pieces need a bucket of 1 to cover any chunk length");
static_assert(kKvPageBytes >= uint64_t(kKvPageTokens) * kKV * sizeof(bf16) && kPageElems % 8 == 0);
static_assert(kBufBytes_page_tables >= uint64_t(H200Engine::kSlots) * H200Engine::kPagesPerStream * 4);
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
  using GU = cuda::MoeGateUpTraits<MoeS, B, kPrecisionExperts>;
  using Down = cuda::MoeDownTraits<MoeS, B, kPrecisionExperts>;
  static_assert(cuda::kDenseTiles<int(kHidden), B, int(kConvDim), int(kValueDim), int(kLinVHeads), int(kLinVHeads)> ==
                    kKernel_dense_gdn_in[I],
                "dense_gdn_in differs from the plan's");
  static_assert(cuda::GdnDecodeTiling<GdnS, B>::kTiles == kKernel_gdn_decode[I], "gdn_decode differs from the plan's");
  static_assert(cuda::kDenseTiles<int(kValueDim), B, int(kHidden)> == kKernel_dense_gdn_out[I], "dense_gdn_out differs from the plan's");
  static_assert(cuda::kDenseTiles<int(kHidden), B, 2 * kQ, kKV, kKV> == kKernel_dense_attn_qkv[I], "dense_attn_qkv differs from the plan's");
  static_assert(cuda::AttentionTiles<AttnS, B>::kTiles == kKernel_attention_decode[I], "attention_decode differs from the plan's");
  static_assert(cuda::kDenseTiles<kQ, B, int(kHidden)> == kKernel_dense_attn_o[I], "dense_attn_o differs from the plan's");
  static_assert(cuda::kDenseTiles<int(kHidden), B, int(kExperts)> == kKernel_dense_router[I], "dense_router differs from the plan's");
  static_assert(cuda::MoeDispatchTraits<MoeS, B>::kTiles == kKernel_moe_route[I], "moe_route differs from the plan's");
  static_assert(GU::kTiling.tiles_of() == kKernel_moe_gate_up[I], "moe_gate_up differs from the plan's");
  static_assert(Down::kTiling.tiles_of() == kKernel_moe_down[I], "moe_down differs from the plan's");
  static_assert(cuda::kDenseTiles<int(kHidden), B, int(kVocab)> == kKernel_dense_lm_head[I], "dense_lm_head differs from the plan's");
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

// plan.json of the engine directory, refused (Error "upright: ...") unless it is the plan this engine
// was compiled for.
Plan checked_plan(const std::string& dir) {
  Plan plan = Plan::load((fs::path(dir) / "plan.json").string());
  check_plan(plan, EngineBuild{.fingerprint = kFingerprint,
                               .booster = kBooster,
                               .blob_bytes = kBlobBytes,
                               .arena_bytes = kArenaBytes,
                               .slots = H200Engine::kSlots,
                               .pages_per_stream = H200Engine::kPagesPerStream,
                               .full_layers = int(kFullLayers)});
  return plan;
}

// The device's context, created; returns the memory free right after, the budget's starting point.
uint64_t open_context() {
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaFree(nullptr));
  return device_free_bytes();
}

std::string gib(uint64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GiB", double(bytes) / double(1ull << 30));
  return s;
}

}  // namespace

// The fixed device buffer of per-row step inputs (the plan's step_inputs) and its pinned host twin.
struct H200Engine::StepInputs {
  int32_t ids[kMaxBucket];
  int32_t slots[kMaxBucket];  // decode: each row's slot; prefill: slots[0]
  int32_t pos[kMaxBucket];    // decode: each row's position; prefill: pos[0], the piece's first
  SamplingKnobs sample[kMaxBucket];  // decode: each row's; prefill: sample[0], the last piece's pick
};

// Upright in the order engine/h200/README.md prescribes (context, free memory, what lives outside the
// arena, budget, arena): the members' initialisers run in that order (h200_engine.h).
H200Engine::H200Engine(const std::string& engine_dir, uint64_t reserve_bytes)
    : dir_(engine_dir),
      plan_(checked_plan(dir_)),
      contract_(plan_),
      free_at_context_(open_context()),
      stream_(cudaStreamNonBlocking),
      staged_(cudaEventDisableTiming),
      // The step inputs and the sampled tokens cross in mapped pinned memory, read and written by the
      // step's kernels through the same address (unified addressing), so a step needs no copies.
      host_step_(1, cudaHostAllocMapped),
      host_logits_(size_t(kLogitRows) * kVocab, cudaHostAllocDefault),
      host_tokens_(kMaxBucket, cudaHostAllocMapped),
      // Grammar masks the loop thread writes and the sampler reads over PCIe (31 KB a row at a3b's vocab).
      host_masks_(size_t(kMaxBucket) * cuda::mask_words(int(kVocab)), cudaHostAllocMapped),
      host_piece_(1, cudaHostAllocDefault),
      // cuBLAS allocates its own device memory once, here, before the budget is measured; its
      // workspace is the plan's (set in fuel()).
      cublas_(stream_.get()) {
  static_assert(sizeof(StepInputs) <= kBufBytes_step_inputs);
  masked_rows_.assign(kMaxBucket, false);
  for (void* h : {static_cast<void*>(host_step_.get()), static_cast<void*>(host_tokens_.get()),
                  static_cast<void*>(host_masks_.get())}) {
    void* d = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
    if (d != h) throw Error("upright: mapped pinned memory has a device address of its own (no unified addressing)");
  }
  MemoryBudget budget = measure_budget(free_at_context_);
  budget.reserve += reserve_bytes;
  upright_summary_ = "memory: " + budget.describe() + "; plan residency " + gib(kArenaBytes);
  budget.admit(kArenaBytes, "device memory");
  budget_ = budget;
  arena_ = std::make_unique<Arena>(kArenaBytes);
  // The poisoning memset runs on the legacy stream, which the loader's and this engine's non-blocking
  // streams do not wait for.
  CUDA_CHECK(cudaDeviceSynchronize());
}

const LoadReport& H200Engine::fuel(const LoadOptions& load) {
  load_report_ = load_weights((fs::path(dir_) / "weights.blob").string(), kBlobBytes, *arena_, load);
  CUDA_CHECK(cudaMemsetAsync(buf<int>(kBuf_moe_arrivals), 0, kBufBytes_moe_arrivals, stream_.get()));  // the kernel's contract
  CUBLAS_CHECK(cublasSetWorkspace(cublas_.get(), buf<uint8_t>(kBuf_gemm_workspace), kBufBytes_gemm_workspace));
  page_tables_.resize(size_t(kSlots) * kPagesPerStream);
  for (size_t i = 0; i < page_tables_.size(); ++i) page_tables_[i] = int(i);
  CUDA_CHECK(cudaMemcpyAsync(buf<int32_t>(kBuf_page_tables), page_tables_.data(), page_tables_.size() * 4,
                             cudaMemcpyHostToDevice, stream_.get()));
  for (int s = 0; s < kSlots; ++s) reset_slot(s);
  return load_report_;
}

H200Engine::~H200Engine() = default;

int H200Engine::bucket_for(int n) const {
  for (int b : kBuckets)
    if (b >= n) return b;
  throw Error("decode: " + std::to_string(n) + " streams exceed the largest compiled bucket " + std::to_string(kMaxStreams));
}

H200Engine::StepInputs& H200Engine::staging() {
  // The previous step reads the pinned twin asynchronously (prefill's copy, decode's embedding): wait
  // for that before rewriting it.
  CUDA_CHECK(cudaEventSynchronize(staged_.get()));
  return *host_step_.get();
}

void H200Engine::staged_read_enqueued() { CUDA_CHECK(cudaEventRecord(staged_.get(), stream_.get())); }

void H200Engine::upload_step() {
  CUDA_CHECK(cudaMemcpyAsync(buf<StepInputs>(kBuf_step_inputs), host_step_.get(), sizeof(StepInputs), cudaMemcpyHostToDevice, stream_.get()));
  staged_read_enqueued();
}

// ---------------------------------------------------------------------------------------------------
// The forward pass: the host engine's sequence, one kernel (or two) per op.

namespace {

// x_rows: rows of x the kernel may read (dense.cuh, DenseParams::x_rows); 0: rows.
template <int N, int K, int B, typename Out>
void project(const Arena& a, const LinearAt& w, const bf16* x, Out* y, int rows, cudaStream_t s, int x_rows = 0) {
  cuda::dense<N, K, B, Out>({.w = a.at<const bf16>(w.weight), .x = x, .y = y, .rows = rows, .x_rows = x_rows}, s);
}

}  // namespace

template <int B, bool kPrefill>
void H200Engine::enqueue_layers(uint32_t kinds, int slot) {
  const StepInputs* in = buf<StepInputs>(kBuf_step_inputs);
  bf16* x = buf<bf16>(kBuf_x);
  bf16* hn = buf<bf16>(kBuf_hn);
  const bool norm = kinds & kKindNorm;
  auto add_norm = [&](const bf16* delta, uint64_t w) {
    if (norm)
      cuda::add_rms_norm<int(kHidden)>(
          {.x = x, .delta = delta, .residual = x, .w = weight<bf16>(w), .y = hn, .eps = kNormEps}, B, stream_.get());
  };
  // Decode: the embedding reads the step's inputs from the pinned staging and lands them in
  // step_inputs for the kernels after it; prefill copies them before its pieces (upload_step).
  static_assert(sizeof(StepInputs) % 16 == 0);
  cuda::EmbeddingParams embed{.table = weight<bf16>(kEmbed.weight), .ids = in->ids, .x = x};
  if constexpr (!kPrefill) {
    embed.ids = host_step_->ids;
    embed.inputs_from = reinterpret_cast<const uint4*>(host_step_.get());
    embed.inputs_to = buf<uint4>(kBuf_step_inputs);
    embed.input_vectors = int(sizeof(StepInputs) / 16);
  }
  if (norm) cuda::embedding<int(kHidden)>(embed, B, stream_.get());
  for (int l = 0; l < kLayers; ++l) {
    if (l == 0) {
      if (norm) cuda::rms_norm<int(kHidden)>({.x = x, .w = weight<bf16>(kLayer[0].input_norm), .y = hn, .eps = kNormEps}, B, stream_.get());
    } else {
      add_norm(buf<bf16>(kBuf_moe_out), kLayer[l].input_norm);
    }
    mark(StepGroup::kNorm);
    if (kIsFull[l]) attention_layer<B, kPrefill>(l, kinds, slot);
    else gdn_layer<B, kPrefill>(l, kinds);
    add_norm(buf<bf16>(kBuf_attn_out), kLayer[l].post_norm);
    mark(StepGroup::kNorm);
    moe_block<B>(l, kinds);
    mark(StepGroup::kMoe);
  }
  add_norm(buf<bf16>(kBuf_moe_out), kFinalNorm);
  mark(StepGroup::kNorm);
}

template <int B, bool kPrefill>
void H200Engine::gdn_layer(int l, uint32_t kinds) {
  const GdnAt& G = kLayer[l].gdn;
  const StepInputs* in = buf<StepInputs>(kBuf_step_inputs);
  const bf16* hn = buf<bf16>(kBuf_hn);
  bf16* mix = buf<bf16>(kBuf_mix);
  bf16* z = buf<bf16>(kBuf_z);
  bf16* ga = buf<bf16>(kBuf_gdn_a);
  bf16* gb = buf<bf16>(kBuf_gdn_b);
  bf16* core = buf<bf16>(kBuf_core);
  if (kinds & kKindDense) {
    // One launch for the four projections of hn: b and a (2 tiles each) ride in qkv|z's waves.
    cuda::dense_group<int(kHidden), B, bf16, int(kConvDim), int(kValueDim), int(kLinVHeads), int(kLinVHeads)>(
        {.w = {weight<bf16>(G.qkv.weight), weight<bf16>(G.z.weight), weight<bf16>(G.b.weight), weight<bf16>(G.a.weight)},
         .x = hn,
         .y = {mix, z, gb, ga},
         .rows = B},
        stream_.get());
  }
  mark(StepGroup::kDense);
  if (kinds & kKindGdn) {
    const cuda::Conv1dParams cp = conv_params(*arena_, l, 0, in->slots, kPrefill ? B : 1);
    const cuda::GdnParams gp = gdn_params(*arena_, l, in->slots, kPrefill ? B : 1);
    if constexpr (kPrefill) {
      cuda::conv1d_prefill<kMaxBucket, int(kConvDim), int(kConvKernel)>(cp, stream_.get());
      cuda::gdn_prefill<GdnS, kMaxBucket>(gp, stream_.get());
    } else {
      cuda::conv1d_decode<B, int(kConvDim), int(kConvKernel)>(cp, stream_.get());
      cuda::gdn_decode<GdnS, B>(gp, stream_.get());
    }
  }
  mark(StepGroup::kGdn);
  if (kinds & kKindDense) project<int(kHidden), int(kValueDim), B>(*arena_, G.out, core, buf<bf16>(kBuf_attn_out), B, stream_.get());
  mark(StepGroup::kDense);
}

template <int B, bool kPrefill>
void H200Engine::attention_layer(int l, uint32_t kinds, int slot) {
  const AttnAt& A = kLayer[l].attn;
  const StepInputs* in = buf<StepInputs>(kBuf_step_inputs);
  const bf16* hn = buf<bf16>(kBuf_hn);
  bf16* qg = buf<bf16>(kBuf_mix);  // per head: query [hd] then gate [hd]
  bf16* k = buf<bf16>(kBuf_k);
  bf16* v = buf<bf16>(kBuf_v);
  bf16* core = buf<bf16>(kBuf_core);
  if (kinds & kKindDense) {
    // One launch for q|gate, k and v (k and v are 32 tiles each: latency bound on their own).
    cuda::dense_group<int(kHidden), B, bf16, 2 * kQ, kKV, kKV>(
        {.w = {weight<bf16>(A.q.weight), weight<bf16>(A.k.weight), weight<bf16>(A.v.weight)},
         .x = hn,
         .y = {qg, k, v},
         .rows = B},
        stream_.get());
  }
  mark(StepGroup::kDense);
  if (kinds & kKindAttention) {
    const int32_t* table = buf<int32_t>(kBuf_page_tables) + (kPrefill ? int64_t(slot) * kPagesPerStream : 0);
    const cuda::AttentionParams<AttnS> p = attention_params(*arena_, l, 0, table, kPagesPerStream, in->slots, in->pos);
    if constexpr (kPrefill) cuda::attention_prefill<AttnS, B>(p, stream_.get());
    else cuda::attention_decode<AttnS, B>(p, stream_.get());
  }
  mark(StepGroup::kAttention);
  if (kinds & kKindDense) project<int(kHidden), kQ, B>(*arena_, A.o, core, buf<bf16>(kBuf_attn_out), B, stream_.get());
  mark(StepGroup::kDense);
}

template <int B>
void H200Engine::moe_block(int l, uint32_t kinds) {
  if (!(kinds & kKindMoe)) return;
  const LayerAt& L = kLayer[l];
  const bf16* hn = buf<bf16>(kBuf_hn);
  float* router = buf<float>(kBuf_router);
  int32_t* idx = buf<int32_t>(kBuf_route_idx);
  float* w = buf<float>(kBuf_route_w);
  auto* route = buf<cuda::MoeRoute<MoeS, B>>(kBuf_moe_route);
  const uint8_t* experts = weight<uint8_t>(L.experts);
  project<int(kExperts), int(kHidden), B, float>(*arena_, L.router, hn, router, B, stream_.get());
  cuda::moe_route<MoeS, B>({.logits = router, .idx = idx, .weight = w, .route = route}, stream_.get());
  cuda::moe_gate_up<MoeS, B, kPrecisionExperts>({.x = hn,
                                                 .route = route,
                                                 .experts = experts,
                                                 .expert_stride = kExpertStride,
                                                 .expert = kExpert,
                                                 .shared_gate = weight<bf16>(L.shared_gate.weight),
                                                 .shared_up = weight<bf16>(L.shared_up.weight),
                                                 .shared_expert_gate = weight<bf16>(L.shared_expert_gate.weight),
                                                 .act = buf<bf16>(kBuf_moe_act),
                                                 .shared_act = buf<bf16>(kBuf_shared_act),
                                                 .shared_scale = buf<float>(kBuf_shared_scale),
                                                 .partial = buf<float>(kBuf_moe_partial),
                                                 .arrivals = buf<int>(kBuf_moe_arrivals)},
                                                stream_.get());
  cuda::moe_down<MoeS, B, kPrecisionExperts>({.route = route,
                                              .route_weight = w,
                                              .experts = experts,
                                              .expert_stride = kExpertStride,
                                              .expert = kExpert,
                                              .shared_down = weight<bf16>(L.shared_down.weight),
                                              .act = buf<bf16>(kBuf_moe_act),
                                              .shared_act = buf<bf16>(kBuf_shared_act),
                                              .shared_scale = buf<float>(kBuf_shared_scale),
                                              .out = buf<bf16>(kBuf_moe_out)},
                                             stream_.get());
}

template <int B>
void H200Engine::enqueue_decode(uint32_t kinds, int logits_row) {
  const StepInputs* in = buf<StepInputs>(kBuf_step_inputs);
  enqueue_layers<B, false>(kinds, -1);
  float* logits = buf<float>(kBuf_logits) + int64_t(logits_row) * kVocab;
  // Every mma column reads a row of hn (its kMaxRows rows are all readable; the extra products are
  // discarded): faster below 8 live rows (dense.cuh, DenseParams::x_rows).
  if (kinds & kKindLmHead)
    project<int(kVocab), int(kHidden), B, float>(*arena_, kLmHead, buf<bf16>(kBuf_hn), logits, B, stream_.get(), int(kMaxRows));
  mark(StepGroup::kLmHead);
  if (kinds & kKindSampling)
    cuda::sample<B, int(kVocab)>({.logits = logits,
                                  .knobs = in->sample,
                                  .tokens = host_tokens_.get(),
                                  .counts = buf<int32_t>(kBuf_history_counts),
                                  .prompt = buf<uint32_t>(kBuf_history_prompt),
                                  .bias = buf<LogitBias>(kBuf_history_bias),
                                  .mask = host_masks_.get()},
                                 stream_.get());
  mark(StepGroup::kSampling);
}

template <int B>
void H200Engine::enqueue_prefill(int slot, bool logits) {
  enqueue_layers<B, true>(kKindAll, slot);
  if (logits)
    project<int(kVocab), int(kHidden), B, float>(*arena_, kLmHead, buf<bf16>(kBuf_hn), buf<float>(kBuf_logits), B, stream_.get());
}

// ---------------------------------------------------------------------------------------------------
// Steps

void H200Engine::prefill(int slot, const int32_t* ids, int n, int64_t pos0, int first_logit_row,
                         const SamplingKnobs* knobs, const PrefillCapture* capture) {
  CHECK(n >= 1 && n <= kPrefillChunk && slot >= 0 && slot < kMaxStreams && first_logit_row >= 0 && first_logit_row <= n);
  if (pos0 + n > kMaxContext)
    throw Error("prefill: positions up to " + std::to_string(pos0 + n) + " exceed the plan's context " + std::to_string(kMaxContext));
  for (int i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= kVocab)
      throw Error("token id " + std::to_string(ids[i]) + " outside the vocabulary [0, " + std::to_string(kVocab) + ")");
  CHECK(!capture || (capture->tokens > 0 && capture->tokens < n && capture->snapshot >= 0 && capture->snapshot < kStateSnapshots),
        "prefill: capture outside the call");
  // The rows wanted land in the pinned buffer when one LM-head pass holds them (serving wants one
  // row), else in pageable memory (the parity runner wants every row of a long piece).
  logits_base_ = first_logit_row;
  logits_rows_ = n - first_logit_row;
  if (logits_rows_ <= kLogitRows) {
    logits_at_ = host_logits_.get();
  } else {
    wide_logits_.resize(size_t(logits_rows_) * kVocab);
    logits_at_ = wide_logits_.data();
  }
  // Where row r (>= first_logit_row) of the call lands on the host.
  auto row_at = [&](int r) { return logits_at_ + int64_t(r - first_logit_row) * kVocab; };
  // Rows [at, at + len): the token path from kTokenPieceMin rows, else pieces of the bucket sizes.
  auto run = [&](int at, int len, const PrefillCapture* inside) {
    const bool pick = knobs && at + len == n;
    if (len >= kTokenPieceMin) {
      const PieceSegment seg{.slot = slot, .row0 = 0, .n = len, .pos0 = pos0 + at, .capture = inside};
      prefill_piece({&seg, 1}, ids + at, kKindAll);
      const int first = std::max(first_logit_row - at, 0);
      piece_lm_head(len, first, row_at(at + first), pick ? knobs : nullptr);
      return;
    }
    CHECK(!inside, "a capture inside bucket-sized pieces is split off by the caller");
    for (int end = at + len; at < end;) {
      const int piece = bucket_at_most(end - at);
      StepInputs& s = staging();
      std::copy(ids + at, ids + at + piece, s.ids);
      s.slots[0] = slot;
      s.pos[0] = int32_t(pos0 + at);
      const bool last = pick && at + piece == end;
      if (last) s.sample[0] = staged_knobs(knobs, 0);  // staged with the piece's inputs: pick_tokens' staging, folded in
      upload_step();
      const bool want = at + piece > first_logit_row;
      with_bucket(piece, [&]<int B>() { enqueue_prefill<B>(slot, want || last); });
      if (last) enqueue_decode<1>(kKindSampling, piece - 1);
      if (want) {
        const int r0 = std::max(first_logit_row - at, 0);
        CUDA_CHECK(cudaMemcpyAsync(row_at(at + r0), buf<float>(kBuf_logits) + int64_t(r0) * kVocab,
                                   sizeof(float) * (piece - r0) * kVocab, cudaMemcpyDeviceToHost, stream_.get()));
      }
      at += piece;
    }
  };
  if (!capture) {
    run(0, n, nullptr);
  } else if (n >= kTokenPieceMin && (pos0 + capture->tokens) % tiling::kGdnChunk == 0) {
    // The token path takes the snapshot inside its layers (h200_piece.cu).
    run(0, n, capture);
  } else {
    run(0, capture->tokens, nullptr);
    capture_state(slot, capture->snapshot);
    run(capture->tokens, n - capture->tokens, nullptr);
  }
  masked_rows_.assign(kMaxBucket, false);
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
}

void H200Engine::mask_next_picks(std::span<const uint32_t* const> masks) {
  CHECK(masks.size() <= size_t(kMaxBucket), "masks for more rows than the largest bucket");
  constexpr int kWords = cuda::mask_words(int(kVocab));
  // The last call's sampler may still read the rows: the scheduler has its tokens by now, so this waits
  // for nothing in practice, but the rows are never rewritten under a running sampler.
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  masked_rows_.assign(kMaxBucket, false);
  for (size_t i = 0; i < masks.size(); ++i) {
    if (!masks[i]) continue;
    std::copy_n(masks[i], kWords, host_masks_.get() + i * kWords);
    masked_rows_[i] = true;
  }
}

SamplingKnobs H200Engine::staged_knobs(const SamplingKnobs* k, int row) const {
  SamplingKnobs r = k ? *k : SamplingKnobs{.temperature = 0.0f};
  r.masked = masked_rows_[size_t(row)] ? 1 : 0;
  return r;
}

void H200Engine::pick_tokens(std::span<const SamplingKnobs* const> knobs, int logits_row) {
  const int rows = int(knobs.size()), b = bucket_for(rows);
  StepInputs& s = staging();
  for (int i = 0; i < b; ++i) s.sample[i] = i < rows ? staged_knobs(knobs[size_t(i)], i) : SamplingKnobs{.temperature = 0.0f};
  upload_step();
  with_bucket(b, [&]<int B>() { enqueue_decode<B>(kKindSampling, logits_row); });
}

void H200Engine::prefill_batch(std::span<const PrefillSegment> segments, int decode) {
  // The piece is the contract's layout of the call (decode rows, the decode bucket's padding rows on
  // kPadSlot, the prompt pieces), checked: the rows and entries it runs are the ones the scheduler's
  // bounds counted (the layout once appended a second round of padding after the prompts; issue 38).
  const CallLayout L = contract_.check_prefill_batch(segments, decode);
  std::vector<PieceSegment> pieces;
  std::vector<int32_t> ids;
  ids.reserve(size_t(L.rows));
  for (const CallLayout::Entry& e : L.entries) {
    if (e.segment < 0) {
      pieces.push_back({.slot = kPadSlot, .row0 = e.row0, .n = 1, .pos0 = 0, .capture = nullptr});
      ids.push_back(segments[0].ids[0]);
      continue;
    }
    const PrefillSegment& g = segments[size_t(e.segment)];
    pieces.push_back({.slot = g.slot, .row0 = e.row0, .n = g.n, .pos0 = g.pos0, .capture = g.capture});
    ids.insert(ids.end(), g.ids, g.ids + g.n);
  }
  prefill_piece(pieces, ids.data(), kKindAll, L.bucket);
  // The picks and logits are the segments' own, in segment order: the padding rows are left out.
  std::vector<PieceSegment> real;
  for (size_t i = 0; i < L.entries.size(); ++i)
    if (L.entries[i].segment >= 0) real.push_back(pieces[i]);
  segments_lm_head(real, segments);
  masked_rows_.assign(kMaxBucket, false);
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
}

void H200Engine::decode(int n, const int32_t* ids, const int* slots, const int64_t* pos, const SamplingKnobs* knobs,
                        bool timed) {
  // The plan's limits on a decode call (rows, distinct slots, positions, token ids) have one source,
  // the contract the host engine and the scheduler check too.
  contract_.check_decode(n, ids, slots, pos);
  const int b = bucket_for(n);
  StepInputs& s = staging();
  for (int i = 0; i < b; ++i) {
    const bool real = i < n;
    s.ids[i] = real ? ids[i] : ids[0];
    s.slots[i] = real ? slots[i] : kPadSlot;
    s.pos[i] = real ? int32_t(pos[i]) : 0;
    s.sample[i] = real ? staged_knobs(knobs ? knobs + i : nullptr, i) : SamplingKnobs{.temperature = 0.0f};
  }
  // The graph's embedding reads the staging itself (enqueue_layers). A timed step runs the same
  // kernels with events between their groups.
  timed_ = timed ? &timing_graph(b) : nullptr;
  CUDA_CHECK(cudaGraphLaunch(timed_ ? timed_->exec.get() : graph(b, kKindAll), stream_.get()));
  staged_read_enqueued();
  step_rows_ = b;
  masked_rows_.assign(kMaxBucket, false);
}

H200Engine::TimingGraph& H200Engine::timing_graph(int b) {
  for (auto& t : timing_graphs_)
    if (t->bucket == b) return *t;
  auto t = std::make_unique<TimingGraph>();
  t->bucket = b;
  // Events exist before the capture (nothing but stream work inside it): one per group boundary.
  constexpr int kMarks = 6 * int(kLayers) + 3;
  t->events.reserve(kMarks + 1);
  for (int i = 0; i <= kMarks; ++i) t->events.emplace_back(cudaEventDefault);
  t->exec = capture_graph(stream_.get(), [&] {
    // cudaEventRecordExternal: a record node in the graph (a plain record in a capture only orders streams).
    CUDA_CHECK(cudaEventRecordWithFlags(t->events[0].get(), stream_.get(), cudaEventRecordExternal));
    capturing_ = t.get();
    try {
      with_bucket(b, [&]<int B>() { enqueue_decode<B>(kKindAll); });
    } catch (...) {
      capturing_ = nullptr;
      throw;
    }
    capturing_ = nullptr;
  });
  CHECK(int(t->groups.size()) == kMarks, "the timing graph's marks are the group boundaries of a decode step");
  timing_graphs_.push_back(std::move(t));
  return *timing_graphs_.back();
}

void H200Engine::mark(StepGroup group) {
  if (!capturing_) return;
  const size_t i = capturing_->groups.size() + 1;
  CHECK(i < capturing_->events.size(), "more group boundaries than the timing graph has events");
  CUDA_CHECK(cudaEventRecordWithFlags(capturing_->events[i].get(), stream_.get(), cudaEventRecordExternal));
  capturing_->groups.push_back(group);
}

StepSplit H200Engine::step_split() {
  CHECK(timed_, "step_split() after a decode that was not timed");
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  StepSplit split{.rows = timed_->bucket};
  for (size_t i = 0; i < timed_->groups.size(); ++i) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, timed_->events[i].get(), timed_->events[i + 1].get()));
    split[timed_->groups[i]] += 1e-3 * ms;
  }
  timed_ = nullptr;
  return split;
}

const int32_t* H200Engine::tokens() {
  // The sampler wrote them to the mapped host_tokens_; the step's end makes them visible here.
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  return host_tokens_.get();
}

void H200Engine::download_logits(int n) {
  CHECK(n >= 1 && n <= step_rows_);
  CUDA_CHECK(cudaMemcpyAsync(host_logits_.get(), buf<float>(kBuf_logits), sizeof(float) * n * kVocab, cudaMemcpyDeviceToHost, stream_.get()));
  logits_at_ = host_logits_.get();
  logits_base_ = 0;
  logits_rows_ = n;
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
}

cudaGraphExec_t H200Engine::graph(int b, uint32_t kinds) {
  const uint64_t key = uint64_t(b) << 32 | kinds;
  for (auto& [k, g] : graphs_)
    if (k == key) return g.get();
  graphs_.emplace_back(key, capture_graph(stream_.get(), [&] { with_bucket(b, [&]<int B>() { enqueue_decode<B>(kinds); }); }));
  return graphs_.back().second.get();
}

// Static fire: every bucket runs once directly (the first launch of each kernel instantiation sets its
// shared-memory limit, which a capture must not do), then its graph is captured; all rows sit on the
// padding slot, which is reset afterwards. Then the plan's golden token, when the build had goldens.
std::string H200Engine::static_fire() {
  const auto t0 = std::chrono::steady_clock::now();
  for (int b : kBuckets) {
    StepInputs& s = staging();
    for (int i = 0; i < b; ++i) {
      s.ids[i] = int32_t((7919 * (i + 1)) % kVocab);
      s.slots[i] = kPadSlot;
      s.pos[i] = 0;
      s.sample[i] = SamplingKnobs{.temperature = 0.0f};
    }
    with_bucket(b, [&]<int B>() { enqueue_decode<B>(kKindAll); });
    staged_read_enqueued();
    graph(b, kKindAll);
  }
  // The token path once on the padding slot (its pages are its own until the scheduler binds them):
  // cuBLAS picks its kernels and the flash kernel sets its shared-memory limit here, not on a request.
  if constexpr (kPrefillChunk >= kTokenPieceMin) {
    std::vector<int32_t> ids(kTokenPieceMin);
    for (int i = 0; i < kTokenPieceMin; ++i) ids[size_t(i)] = int32_t((7919 * (i + 1)) % kVocab);
    bench_piece(kPadSlot, ids.data(), kTokenPieceMin, 0, kKindAll);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  reset_slot(kPadSlot);
  char summary[256];
  std::snprintf(summary, sizeof summary, "%zu decode graphs captured and run, the token path warmed, in %.2f s",
                std::size(kBuckets), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const StaticFire& f = plan_.static_fire;
  if (f.prompt.empty()) return std::string(summary) + "; no golden token in the plan (build with --golden to check one)";
  const int n = int(f.prompt.size());
  if (n >= kMaxContext) throw Error("static fire: the plan's prompt is longer than its context");
  for (int at = 0; at < n; at += int(kPrefillChunk)) {
    const int c = std::min(int(kPrefillChunk), n - at);
    prefill(0, f.prompt.data() + at, c, at, at + c == n ? c - 1 : c);
  }
  const int32_t got = host::argmax(logits((n - 1) % int(kPrefillChunk)), int(kVocab));
  reset_slot(0);
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  static_fire_passed_ = got == f.token;
  char verdict[256];
  if (static_fire_passed_)
    std::snprintf(verdict, sizeof verdict, "; golden token %d after %d prompt tokens matches the reference", got, n);
  else
    std::snprintf(verdict, sizeof verdict, "; the golden prompt gave token %d, the reference's greedy token is %d "
                  "(reference margin %.3f)", got, f.token, f.margin);
  return summary + std::string(verdict);
}

// ---------------------------------------------------------------------------------------------------
// Slots, pages, state

void H200Engine::reset_slot(int slot) {
  CHECK(slot >= 0 && slot < kSlots);
  CUDA_CHECK(cudaMemsetAsync(buf<float>(kBuf_gdn_state) + slot * kLinearLayers * kGdnStateFloats, 0,
                             sizeof(float) * kLinearLayers * kGdnStateFloats, stream_.get()));
  CUDA_CHECK(cudaMemsetAsync(buf<float>(kBuf_conv_state) + slot * kLinearLayers * kConvStateFloats, 0,
                             sizeof(float) * kLinearLayers * kConvStateFloats, stream_.get()));
}

void H200Engine::reset_history(int slot, std::span<const int32_t> prompt, std::span<const LogitBias> bias) {
  CHECK(slot >= 0 && slot < kMaxBucket && bias.size() <= size_t(kMaxLogitBias), "reset_history arguments");
  constexpr int kWords = history_prompt_words(int(kVocab));
  static_assert(kBufBytes_history_counts >= uint64_t(kMaxBucket) * kVocab * 4 &&
                kBufBytes_history_prompt >= uint64_t(kMaxBucket) * kWords * 4 &&
                kBufBytes_history_bias >= uint64_t(kMaxBucket) * kMaxLogitBias * sizeof(LogitBias));
  std::vector<uint32_t> bits(kWords, 0u);
  for (const int32_t t : prompt) {
    CHECK(t >= 0 && t < int(kVocab), "prompt token outside the vocabulary");
    bits[size_t(t / 32)] |= 1u << (t % 32);
  }
  CUDA_CHECK(cudaMemsetAsync(buf<int32_t>(kBuf_history_counts) + int64_t(slot) * kVocab, 0, sizeof(int32_t) * kVocab, stream_.get()));
  // From pageable memory: the copies have taken the data when the calls return.
  CUDA_CHECK(cudaMemcpyAsync(buf<uint32_t>(kBuf_history_prompt) + int64_t(slot) * kWords, bits.data(), bits.size() * 4,
                             cudaMemcpyHostToDevice, stream_.get()));
  if (!bias.empty())
    CUDA_CHECK(cudaMemcpyAsync(buf<LogitBias>(kBuf_history_bias) + int64_t(slot) * kMaxLogitBias, bias.data(),
                               bias.size() * sizeof(LogitBias), cudaMemcpyHostToDevice, stream_.get()));
}

void H200Engine::bind_pages(int slot, const int* pages, int n) {
  CHECK(slot >= 0 && slot < kSlots && n >= 0 && n <= kPagesPerStream);
  for (int i = 0; i < n; ++i) {
    CHECK(pages[i] >= 0 && pages[i] < kCachePages, "cache page out of range");
    page_tables_[size_t(slot) * kPagesPerStream + i] = pages[i];
  }
  // From pageable memory: the copy has taken the data when the call returns.
  CUDA_CHECK(cudaMemcpyAsync(buf<int32_t>(kBuf_page_tables) + int64_t(slot) * kPagesPerStream,
                             page_tables_.data() + size_t(slot) * kPagesPerStream, sizeof(int32_t) * n, cudaMemcpyHostToDevice,
                             stream_.get()));
}

void H200Engine::copy_page(int src, int dst, int tokens) {
  CHECK(src >= 0 && src < kCachePages && dst >= 0 && dst < kCachePages && tokens >= 0 && tokens <= kKvPageTokens);
  uint8_t* kv = buf<uint8_t>(kBuf_kv_cache);
  for (int64_t l = 0; l < kFullLayers; ++l)
    for (int h = 0; h < 2; ++h)
      CUDA_CHECK(cudaMemcpyAsync(kv + kKv.offset(dst, l, h), kv + kKv.offset(src, l, h), sizeof(bf16) * tokens * kKV,
                                 cudaMemcpyDeviceToDevice, stream_.get()));
}

void H200Engine::capture_state(int slot, int snapshot) {
  CHECK(slot >= 0 && slot < kSlots && snapshot >= 0 && snapshot < kStateSnapshots);
  constexpr uint64_t R = kSnapshot.recurrent_bytes, C = kSnapshot.conv_bytes;
  uint8_t* dst = buf<uint8_t>(kBuf_state_snapshots) + snapshot * kSnapshot.slot_bytes();
  CUDA_CHECK(cudaMemcpyAsync(dst, buf<uint8_t>(kBuf_gdn_state) + slot * R, R, cudaMemcpyDeviceToDevice, stream_.get()));
  CUDA_CHECK(cudaMemcpyAsync(dst + kSnapshot.conv_offset(), buf<uint8_t>(kBuf_conv_state) + slot * C, C,
                             cudaMemcpyDeviceToDevice, stream_.get()));
}

void H200Engine::restore_state(int snapshot, int slot) {
  CHECK(slot >= 0 && slot < kSlots && snapshot >= 0 && snapshot < kStateSnapshots);
  constexpr uint64_t R = kSnapshot.recurrent_bytes, C = kSnapshot.conv_bytes;
  const uint8_t* src = buf<uint8_t>(kBuf_state_snapshots) + snapshot * kSnapshot.slot_bytes();
  CUDA_CHECK(cudaMemcpyAsync(buf<uint8_t>(kBuf_gdn_state) + slot * R, src, R, cudaMemcpyDeviceToDevice, stream_.get()));
  CUDA_CHECK(cudaMemcpyAsync(buf<uint8_t>(kBuf_conv_state) + slot * C, src + kSnapshot.conv_offset(), C,
                             cudaMemcpyDeviceToDevice, stream_.get()));
}

void H200Engine::copy_state(int from_slot, int to_slot) {
  CHECK(from_slot >= 0 && from_slot < kSlots && to_slot >= 0 && to_slot < kSlots);
  constexpr uint64_t R = kSnapshot.recurrent_bytes, C = kSnapshot.conv_bytes;
  uint8_t* g = buf<uint8_t>(kBuf_gdn_state);
  uint8_t* c = buf<uint8_t>(kBuf_conv_state);
  CUDA_CHECK(cudaMemcpyAsync(g + to_slot * R, g + from_slot * R, R, cudaMemcpyDeviceToDevice, stream_.get()));
  CUDA_CHECK(cudaMemcpyAsync(c + to_slot * C, c + from_slot * C, C, cudaMemcpyDeviceToDevice, stream_.get()));
}

}  // namespace rocket
