// The token path: one prefill piece of n tokens (kTokenPieceMin <= n <= kPrefillChunk) of one stream,
// each layer's work done over all n rows at once, so a weight is read once per piece instead of once
// per 32 tokens. The same sequence and the same state as the bucket-sized pieces of h200_engine.cu:
//
//   projections    cuBLAS GEMMs over the piece's rows (kernels/cuda/primitives/gemm.cuh)
//   conv1d         every (row, channel) at once (conv1d.cuh conv1d_piece), bit-identical outputs
//   GDN            the chunked gated delta rule over the piece (gdn_chunked.cuh)
//   attention      KV appended for the whole piece, then flash attention over the paged KV on the
//                  tensor cores (attention_flash.cuh)
//   MoE            router GEMM, then token-tiled grouped experts: each expert's weights read once per
//                  piece (moe_piece.cuh)
//   LM head        only at the rows that want logits (and the last, when it picks), a pass at a time
//
// A snapshot inside the piece (PrefillCapture) is taken as it passes: the conv state from the piece's
// own conv inputs, each layer's recurrent state by the GDN scan at the end of the chunk it names.
// Not graph-captured (its shape is the piece's length); every launch is checked.
#include <cublas_v2.h>

#include <algorithm>

#include "engine/h200/forward_shapes.h"
#include "engine/h200/h200_engine.h"
#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/conv1d.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/gdn_chunked.cuh"
#include "kernels/cuda/moe_piece.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/gemm.cuh"
#include "kernels/cuda/rms_norm.cuh"

namespace rocket {

using namespace h200;

static_assert(sizeof(H200Engine::PieceInputs) <= kBufBytes_piece_inputs, "the compiler sized piece_inputs for another piece");

namespace {

// y[n][N] = x[n][K] · Wᵀ for a bf16 weight of the arena.
template <typename Out>
void project(cublasHandle_t h, const bf16* w, int N, int K, const bf16* x, int n, Out* y) {
  cuda::gemm_rows<Out>(h, w, N, K, x, K, n, y, N);
}

}  // namespace

void H200Engine::bench_piece(int slot, const int32_t* ids, int n, int64_t pos0, uint32_t kinds) {
  CHECK(n >= kTokenPieceMin && n <= kPrefillChunk && slot >= 0 && slot < kSlots && pos0 + n <= kMaxContext);
  prefill_piece(slot, ids, n, pos0, n, nullptr, nullptr, nullptr, kinds);
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void H200Engine::prefill_piece(int slot, const int32_t* ids, int n, int64_t pos0, int first_logit_row, float* logits_to,
                               const SamplingKnobs* knobs, const PrefillCapture* capture, uint32_t kinds) {
  // The previous piece's copies out of host_piece_ must have run before it is rewritten (a prefill
  // split around a capture runs two pieces in one call; otherwise the stream is idle already).
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  PieceInputs& in = *host_piece_;
  std::copy(ids, ids + n, in.ids);
  for (int r = 0; r < n; ++r) in.pos[r] = int32_t(pos0 + r);
  in.slot[0] = slot;
  const int chunks = tiling::gdn_chunks(n), first = tiling::kGdnChunk - int(pos0 % tiling::kGdnChunk);
  std::fill(in.capture_at, in.capture_at + chunks, -1);
  if (capture) {
    CHECK((pos0 + capture->tokens) % tiling::kGdnChunk == 0, "token path: a capture ends a GDN chunk");
    in.capture_at[capture->tokens <= first ? 0 : (capture->tokens - first) / tiling::kGdnChunk] = capture->snapshot;
  }
  PieceInputs* dev = buf<PieceInputs>(kBuf_piece_inputs);
  CUDA_CHECK(cudaMemcpyAsync(dev->ids, in.ids, sizeof(int32_t) * n, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev->pos, in.pos, sizeof(int32_t) * n, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev->slot, in.slot, sizeof(in.slot), cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev->capture_at, in.capture_at, sizeof(int32_t) * chunks, cudaMemcpyHostToDevice, stream_));

  bf16* x = buf<bf16>(kBuf_x);
  bf16* hn = buf<bf16>(kBuf_hn);
  const bool norm = kinds & kKindNorm;
  auto add_norm = [&](const bf16* delta, uint64_t w) {
    if (norm)
      cuda::add_rms_norm<int(kHidden)>({.x = x, .delta = delta, .residual = x, .w = weight<bf16>(w), .y = hn, .eps = kNormEps}, n,
                                       stream_);
  };
  if (norm) cuda::embedding<int(kHidden)>({.table = weight<bf16>(kEmbed.weight), .ids = dev->ids, .x = x}, n, stream_);
  for (int l = 0; l < kLayers; ++l) {
    if (l == 0) {
      if (norm) cuda::rms_norm<int(kHidden)>({.x = x, .w = weight<bf16>(kLayer[0].input_norm), .y = hn, .eps = kNormEps}, n, stream_);
    } else {
      add_norm(buf<bf16>(kBuf_moe_out), kLayer[l].input_norm);
    }
    if (kIsFull[l]) piece_attention(l, slot, n, pos0, kinds);
    else piece_gdn(l, slot, n, pos0, capture, kinds);
    add_norm(buf<bf16>(kBuf_attn_out), kLayer[l].post_norm);
    piece_moe(l, n, kinds);
  }
  add_norm(buf<bf16>(kBuf_moe_out), kFinalNorm);
  if (kinds & kKindLmHead) piece_lm_head(n, first_logit_row, logits_to, knobs);
}

void H200Engine::piece_gdn(int l, int slot, int n, int64_t pos0, const PrefillCapture* capture, uint32_t kinds) {
  const GdnAt& G = kLayer[l].gdn;
  const PieceInputs* dev = buf<PieceInputs>(kBuf_piece_inputs);
  const bf16* hn = buf<bf16>(kBuf_hn);
  bf16* mix = buf<bf16>(kBuf_mix);
  bf16* mixc = buf<bf16>(kBuf_mixc);
  bf16* z = buf<bf16>(kBuf_z);
  bf16* ga = buf<bf16>(kBuf_gdn_a);
  bf16* gb = buf<bf16>(kBuf_gdn_b);
  bf16* core = buf<bf16>(kBuf_core);
  if (kinds & kKindDense) {
    project(cublas_, weight<bf16>(G.qkv.weight), int(kConvDim), int(kHidden), hn, n, mix);
    project(cublas_, weight<bf16>(G.z.weight), int(kValueDim), int(kHidden), hn, n, z);
    project(cublas_, weight<bf16>(G.b.weight), int(kLinVHeads), int(kHidden), hn, n, gb);
    project(cublas_, weight<bf16>(G.a.weight), int(kLinVHeads), int(kHidden), hn, n, ga);
  }
  if (kinds & kKindGdn) {
    const int64_t layer = kKindSlot[l];
    float* conv_state = buf<float>(kBuf_conv_state) + layer * kConvStateFloats;
    float* gdn_state = buf<float>(kBuf_gdn_state) + layer * kGdnStateFloats;
    uint8_t* snapshot = capture ? buf<uint8_t>(kBuf_state_snapshots) + capture->snapshot * kSnapshot.slot_bytes() : nullptr;
    // The recurrence over the whole piece in chunks of 64 positions (gdn_chunked.cuh); a capture names
    // the chunk ending at its boundary (prefill() sends only boundaries at multiples of 64).
    const cuda::Conv1dParams cp{.x = mix,
                                .w = weight<bf16>(G.conv),
                                .state = conv_state,
                                .slot_stride = kLinearLayers * kConvStateFloats,
                                .slots = dev->slot,
                                .out = mixc,
                                .tokens = n};
    // Both captures read the state before the piece: first the snapshot's, then the piece's own end.
    if (capture)
      cuda::conv1d_capture<int(kConvDim), int(kConvKernel)>(
          cp, capture->tokens, reinterpret_cast<float*>(snapshot + kSnapshot.conv_offset()) + layer * kConvStateFloats, stream_);
    cuda::conv1d_piece<int(kConvDim), int(kConvKernel)>(cp, stream_);
    cuda::conv1d_capture<int(kConvDim), int(kConvKernel)>(cp, n, conv_state + int64_t(slot) * cp.slot_stride, stream_);
    const cuda::GdnChunkedParams gp{.qkv = mixc,
                                    .a = ga,
                                    .b = gb,
                                    .z = z,
                                    .a_log = weight<bf16>(G.a_log),
                                    .dt_bias = weight<bf16>(G.dt_bias),
                                    .norm_w = weight<bf16>(G.norm),
                                    .state = gdn_state + int64_t(slot) * kLinearLayers * kGdnStateFloats,
                                    .snapshot_state = reinterpret_cast<float*>(buf<uint8_t>(kBuf_state_snapshots)) +
                                                      layer * kGdnStateFloats,
                                    .snapshot_stride = int64_t(kSnapshot.slot_bytes() / sizeof(float)),
                                    .capture_at = capture ? dev->capture_at : nullptr,
                                    .workspace = buf<float>(kBuf_gdn_workspace),
                                    .workspace_floats = int64_t(kBufBytes_gdn_workspace / sizeof(float)),
                                    .out = core,
                                    .tokens = n,
                                    .pos0 = int(pos0),
                                    .eps = kNormEps};
    cuda::gdn_chunked<GdnS>(gp, stream_);
  }
  if (kinds & kKindDense)
    project(cublas_, weight<bf16>(G.out.weight), int(kHidden), int(kValueDim), core, n, buf<bf16>(kBuf_attn_out));
}

void H200Engine::piece_attention(int l, int slot, int n, int64_t pos0, uint32_t kinds) {
  const AttnAt& A = kLayer[l].attn;
  const PieceInputs* dev = buf<PieceInputs>(kBuf_piece_inputs);
  const bf16* hn = buf<bf16>(kBuf_hn);
  bf16* qg = buf<bf16>(kBuf_mix);  // per head: query [hd] then gate [hd]
  bf16* k = buf<bf16>(kBuf_k);
  bf16* v = buf<bf16>(kBuf_v);
  bf16* core = buf<bf16>(kBuf_core);
  if (kinds & kKindDense) {
    project(cublas_, weight<bf16>(A.q.weight), 2 * kQ, int(kHidden), hn, n, qg);
    project(cublas_, weight<bf16>(A.k.weight), kKV, int(kHidden), hn, n, k);
    project(cublas_, weight<bf16>(A.v.weight), kKV, int(kHidden), hn, n, v);
  }
  if (kinds & kKindAttention) {
    bf16* kv = buf<bf16>(kBuf_kv_cache);
    const int64_t layer = kKindSlot[l];
    const cuda::AttentionParams<AttnS> p{
        .qg = qg,
        .k = k,
        .v = v,
        .q_norm = weight<bf16>(A.q_norm),
        .k_norm = weight<bf16>(A.k_norm),
        .k_cache = kv + kKv.offset(0, layer, 0) / sizeof(bf16),
        .v_cache = kv + kKv.offset(0, layer, 1) / sizeof(bf16),
        .page_stride = int64_t(kKv.cache_page_bytes() / sizeof(bf16)),
        .page_table = buf<int32_t>(kBuf_page_tables) + int64_t(slot) * kPagesPerStream,
        .table_width = kPagesPerStream,
        .slots = dev->slot,
        .pos = dev->pos,
        .partial = buf<float>(kBuf_attn_partial),
        .out = core,
        .eps = kNormEps,
        .rope = rope_table()};
    cuda::attention_append<AttnS>(p, n, stream_);
    cuda::attention_flash<AttnS>(p, n, int(pos0), stream_);
  }
  if (kinds & kKindDense) project(cublas_, weight<bf16>(A.o.weight), int(kHidden), kQ, core, n, buf<bf16>(kBuf_attn_out));
}

void H200Engine::piece_moe(int l, int n, uint32_t kinds) {
  if (!(kinds & kKindMoe)) return;
  const LayerAt& L = kLayer[l];
  const bf16* hn = buf<bf16>(kBuf_hn);
  float* router = buf<float>(kBuf_router);
  project(cublas_, weight<bf16>(L.router.weight), int(kExperts), int(kHidden), hn, n, router);
  cuda::moe_piece<MoeS, kPrecisionExperts>({.x = hn,
                                            .logits = router,
                                            .experts = weight<uint8_t>(L.experts),
                                            .expert_stride = kExpertStride,
                                            .expert = kExpert,
                                            .shared_gate = weight<bf16>(L.shared_gate.weight),
                                            .shared_up = weight<bf16>(L.shared_up.weight),
                                            .shared_down = weight<bf16>(L.shared_down.weight),
                                            .shared_expert_gate = weight<bf16>(L.shared_expert_gate.weight),
                                            .route_idx = buf<int32_t>(kBuf_route_idx),
                                            .route_w = buf<float>(kBuf_route_w),
                                            .workspace = buf<uint8_t>(kBuf_moe_workspace),
                                            .max_tokens = int(kPrefillChunk),
                                            .out = buf<bf16>(kBuf_moe_out)},
                                           n, stream_);
}

// Logits only where they are wanted, kLogitRows rows a pass; with knobs, the last row's pass is the
// last one and the sampler reads that row from it.
void H200Engine::piece_lm_head(int n, int first_logit_row, float* logits_to, const SamplingKnobs* knobs) {
  const bf16* hn = buf<bf16>(kBuf_hn);
  float* logits = buf<float>(kBuf_logits);
  const int from = knobs ? std::min(first_logit_row, n - 1) : first_logit_row;
  for (int at = from; at < n; at += int(kLogitRows)) {
    const int rows = std::min(int(kLogitRows), n - at);
    project(cublas_, weight<bf16>(kLmHead.weight), int(kVocab), int(kHidden), hn + int64_t(at) * kHidden, rows, logits);
    const int r0 = std::max(first_logit_row, at);
    if (r0 < at + rows)
      CUDA_CHECK(cudaMemcpyAsync(logits_to + int64_t(r0) * kVocab, logits + int64_t(r0 - at) * kVocab,
                                 sizeof(float) * (at + rows - r0) * kVocab, cudaMemcpyDeviceToHost, stream_));
    if (knobs && at + rows == n) pick_first_token(*knobs, rows - 1);
  }
}

}  // namespace rocket
