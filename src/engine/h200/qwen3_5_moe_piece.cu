// The qwen3_5_moe token path (qwen3_5_moe_forward.h): one prefill piece of n tokens (kTokenPieceMin <=
// n <= kPrefillChunk) of one stream, each layer's work done over all n rows at once, so a weight is read
// once per piece instead of once per 32 tokens. The same sequence and the same state as the
// bucket-sized pieces of qwen3_5_moe_step.cu:
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
// A mixed step (prefill_batch with decode rows, one-row segments first) puts decoding streams' rows first, padded
// to a decode bucket: their GDN and attention are the decode kernels' (one recurrent step, split-K
// attention), their projections and experts the piece's, so a step of 16 decode rows and a prompt's
// chunk reads every weight once.
//
// A snapshot inside the piece (PrefillCapture) is taken as it passes: the conv state from the piece's
// own conv inputs, each layer's recurrent state by the GDN scan at the end of the chunk it names.
// Not graph-captured (its shape is the piece's length); every launch is checked.
#include <cublas_v2.h>

#include <algorithm>

#include "engine/h200/forward_shapes.h"
#include "engine/h200/qwen3_5_moe_forward.h"
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/conv1d.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/fp8_dequant.cuh"
#include "kernels/cuda/gdn_chunked.cuh"
#include "kernels/cuda/moe_piece.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/gemm.cuh"
#include "kernels/cuda/rms_norm.cuh"

namespace rocket {

using namespace h200;

// The prefix cache snapshots at page boundaries, which the GDN scan passes only at its chunk ends.
static_assert(kKvPageTokens % tiling::kGdnChunk == 0, "token path: KV pages must hold whole 64-token GDN chunks");

namespace {

// y[n][N] = x[n][K] · Wᵀ for a weight of the arena in precision P: bf16 straight from the arena, block
// FP8 dequantised first into the plan's `dequant` buffer (fp8_dequant.cuh) — in slices of whole
// 128-row scale blocks where the weight is larger than the buffer (an FP8 LM head: the plan sizes the
// buffer for tiling::kLmHeadSliceRows of it, compiler/memory_map.cc).
template <Precision P, typename Out>
void project(H200Runner& run, const LinearAt& w, int N, int K, const bf16* x, int n, Out* y) {
  if constexpr (P == Precision::kFP8Block) {
    const uint64_t room_rows = kBufBytes_dequant / (uint64_t(K) * 2);
    const int slice = room_rows >= uint64_t(N) ? N : int(room_rows / tiling::kFp8Block * tiling::kFp8Block);
    CHECK(slice >= 1, "token path: an FP8 projection larger than the plan's dequant buffer");
    bf16* copy = run.buf<bf16>(kBuf_dequant);
    const auto* weights = run.arena().at<const uint8_t>(w.weight);
    const auto* scales = run.arena().at<const float>(w.scale);
    for (int r0 = 0; r0 < N; r0 += slice) {
      const int rows = std::min(slice, N - r0);
      cuda::fp8_dequant(weights + int64_t(r0) * K, scales + int64_t(r0 / tiling::kFp8Block) * tiling::fp8_scale_cols(K), rows,
                        K, copy, run.stream());
      cuda::gemm_rows<Out>(run.cublas(), copy, rows, K, x, K, n, y + r0, N);
    }
  } else {
    static_assert(P == Precision::kBF16, "token path: projections are bf16 or block FP8");
    cuda::gemm_rows<Out>(run.cublas(), run.arena().at<const bf16>(w.weight), N, K, x, K, n, y, N);
  }
}

}  // namespace

void Qwen35MoeForward::prefill_piece(std::span<const PieceSegment> segments, const int32_t* ids, const cuda::RopePosition* rope,
                                     uint32_t kinds, int decode_rows) {
  CHECK(!segments.empty() && int(segments.size()) <= H200Runner::kSlots,
        "token path: " + std::to_string(segments.size()) + " segments for " + std::to_string(H200Runner::kSlots) + " entries");
  const int n = segments.back().row0 + segments.back().n;
  CHECK(n <= kPrefillChunk, "token path: rows beyond the plan's prefill chunk");
  CHECK(decode_rows == 0 || (decode_rows == bucket_at_least(decode_rows) && decode_rows <= int(segments.size()) &&
                             segments[size_t(decode_rows) - 1].row0 == decode_rows - 1),
        "token path: decode rows are a bucket of one-row segments");
  H200Runner::PieceInputs& in = run_.piece_staging();
  std::copy(ids, ids + n, in.ids);
  for (size_t i = 0; i < segments.size(); ++i) {
    const PieceSegment& g = segments[i];
    for (int r = 0; r < g.n; ++r) {
      in.pos[g.row0 + r] = int32_t(g.pos0 + r);
      in.rope[g.row0 + r] = rope ? rope[g.row0 + r] : cuda::RopePosition::text(int32_t(g.pos0 + r));
    }
    in.slot[i] = g.slot;
    const int first = tiling::kGdnChunk - int(g.pos0 % tiling::kGdnChunk);
    std::fill(in.capture_at[i], in.capture_at[i] + tiling::gdn_chunks(g.n), -1);
    if (g.capture) {
      CHECK((g.pos0 + g.capture->tokens) % tiling::kGdnChunk == 0, "token path: a capture ends a GDN chunk");
      in.capture_at[i][g.capture->tokens <= first ? 0 : (g.capture->tokens - first) / tiling::kGdnChunk] = g.capture->snapshot;
    }
  }
  H200Runner::PieceInputs* dev = run_.buf<H200Runner::PieceInputs>(kBuf_piece_inputs);
  CUDA_CHECK(cudaMemcpyAsync(dev->ids, in.ids, sizeof(int32_t) * n, cudaMemcpyHostToDevice, run_.stream()));
  CUDA_CHECK(cudaMemcpyAsync(dev->pos, in.pos, sizeof(int32_t) * n, cudaMemcpyHostToDevice, run_.stream()));
  CUDA_CHECK(cudaMemcpyAsync(dev->rope, in.rope, sizeof(cuda::RopePosition) * n, cudaMemcpyHostToDevice, run_.stream()));
  CUDA_CHECK(cudaMemcpyAsync(dev->slot, in.slot, sizeof(in.slot), cudaMemcpyHostToDevice, run_.stream()));
  CUDA_CHECK(cudaMemcpyAsync(dev->capture_at, in.capture_at, sizeof(in.capture_at[0]) * segments.size(), cudaMemcpyHostToDevice,
                             run_.stream()));

  const bool norm = kinds & kKindNorm;
  auto add_norm = [&](const bf16* delta, uint64_t w) {
    if (norm)
      cuda::add_rms_norm<int(kHidden)>(
          {.x = act_.x, .delta = delta, .residual = act_.x, .w = weight<bf16>(w), .y = act_.hn, .eps = kNormEps}, n, run_.stream());
  };
  if (norm)
    cuda::embedding<int(kHidden)>({.table = weight<bf16>(kEmbed.weight), .ids = dev->ids, .image_rows = image_rows(), .x = act_.x}, n,
                                  run_.stream());
  for (int l = 0; l < kLayers; ++l) {
    if (l == 0) {
      if (norm)
        cuda::rms_norm<int(kHidden)>({.x = act_.x, .w = weight<bf16>(kLayer[0].input_norm), .y = act_.hn, .eps = kNormEps}, n,
                                     run_.stream());
    } else {
      add_norm(act_.moe_out, kLayer[l].input_norm);
    }
    if (kIsFull[l]) piece_attention(l, segments, kinds, decode_rows);
    else piece_gdn(l, segments, kinds, decode_rows);
    add_norm(act_.attn_out, kLayer[l].post_norm);
    piece_moe(l, n, kinds);
  }
  add_norm(act_.moe_out, kFinalNorm);
}

void Qwen35MoeForward::piece_gdn(int l, std::span<const PieceSegment> segments, uint32_t kinds, int decode_rows) {
  const GdnAt& G = kLayer[l].gdn;
  const H200Runner::PieceInputs* dev = run_.buf<H200Runner::PieceInputs>(kBuf_piece_inputs);
  const int n = segments.back().row0 + segments.back().n;
  if (kinds & kKindDense) {
    project<kPrecisionGdnProj>(run_, G.qkv, int(kConvDim), int(kHidden), act_.hn, n, act_.mix);
    project<kPrecisionGdnProj>(run_, G.z, int(kValueDim), int(kHidden), act_.hn, n, act_.z);
    project<kPrecisionGdnGate>(run_, G.b, int(kLinVHeads), int(kHidden), act_.hn, n, act_.gdn_b);
    project<kPrecisionGdnGate>(run_, G.a, int(kLinVHeads), int(kHidden), act_.hn, n, act_.gdn_a);
  }
  if (kinds & kKindGdn) {
    const int64_t layer = kKindSlot[l];
    float* conv_state = run_.buf<float>(kBuf_conv_state) + layer * kConvStateFloats;
    float* gdn_state = run_.buf<float>(kBuf_gdn_state) + layer * kGdnStateFloats;
    // Decode rows: one recurrent step each, as a decode bucket (segment i is row i, on slots[i]).
    if (decode_rows)
      with_bucket(decode_rows, [&]<int B>() {
        const cuda::Conv1dParams cp = conv_params(run_.arena(), l, 0, dev->slot, 1);
        const cuda::GdnParams gp = gdn_params(run_.arena(), l, dev->slot, 1);
        cuda::conv1d_decode<B, int(kConvDim), int(kConvKernel)>(cp, run_.stream());
        cuda::gdn_decode<GdnS, B>(gp, run_.stream());
      });
    // Each stream's rows with its own state: the conv over them, then the recurrence in chunks of 64
    // positions (gdn_chunked.cuh); a capture names the chunk ending at its boundary (prefill() sends
    // only boundaries at multiples of 64).
    for (size_t i = size_t(decode_rows); i < segments.size(); ++i) {
      const PieceSegment& g = segments[i];
      const int64_t r0 = g.row0;
      const cuda::Conv1dParams cp = conv_params(run_.arena(), l, r0, dev->slot + i, g.n);
      // Both captures read the state before the piece: first the snapshot's, then the piece's own end.
      if (g.capture) {
        uint8_t* snapshot = run_.buf<uint8_t>(kBuf_state_snapshots) + g.capture->snapshot * kSnapshot.slot_bytes();
        cuda::conv1d_capture<int(kConvDim), int(kConvKernel)>(
            cp, g.capture->tokens, reinterpret_cast<float*>(snapshot + kSnapshot.conv_offset()) + layer * kConvStateFloats,
            run_.stream());
      }
      cuda::conv1d_piece<int(kConvDim), int(kConvKernel)>(cp, run_.stream());
      cuda::conv1d_capture<int(kConvDim), int(kConvKernel)>(cp, g.n, conv_state + int64_t(g.slot) * cp.slot_stride, run_.stream());
      const cuda::GdnChunkedParams gp{.qkv = act_.mixc + r0 * kConvDim,
                                      .a = act_.gdn_a + r0 * kLinVHeads,
                                      .b = act_.gdn_b + r0 * kLinVHeads,
                                      .z = act_.z + r0 * kValueDim,
                                      .a_log = weight<bf16>(G.a_log),
                                      .dt_bias = weight<bf16>(G.dt_bias),
                                      .norm_w = weight<bf16>(G.norm),
                                      .state = gdn_state + int64_t(g.slot) * kLinearLayers * kGdnStateFloats,
                                      .snapshot_state = reinterpret_cast<float*>(run_.buf<uint8_t>(kBuf_state_snapshots)) +
                                                        layer * kGdnStateFloats,
                                      .snapshot_stride = int64_t(kSnapshot.slot_bytes() / sizeof(float)),
                                      .capture_at = g.capture ? dev->capture_at[i] : nullptr,
                                      .workspace = run_.buf<float>(kBuf_gdn_workspace),
                                      .workspace_floats = int64_t(kBufBytes_gdn_workspace / sizeof(float)),
                                      .out = act_.core + r0 * kValueDim,
                                      .tokens = g.n,
                                      .pos0 = int(g.pos0),
                                      .eps = kNormEps};
      cuda::gdn_chunked<GdnS>(gp, run_.stream());
    }
  }
  if (kinds & kKindDense)
    project<kPrecisionGdnProj>(run_, G.out, int(kHidden), int(kValueDim), act_.core, n, act_.attn_out);
}

void Qwen35MoeForward::piece_attention(int l, std::span<const PieceSegment> segments, uint32_t kinds, int decode_rows) {
  const AttnAt& A = kLayer[l].attn;
  const H200Runner::PieceInputs* dev = run_.buf<H200Runner::PieceInputs>(kBuf_piece_inputs);
  const int n = segments.back().row0 + segments.back().n;
  if (kinds & kKindDense) {
    project<kPrecisionAttnProj>(run_, A.q, 2 * kQ, int(kHidden), act_.hn, n, act_.mix);
    project<kPrecisionAttnProj>(run_, A.k, kKV, int(kHidden), act_.hn, n, act_.k);
    project<kPrecisionAttnProj>(run_, A.v, kKV, int(kHidden), act_.hn, n, act_.v);
  }
  if (kinds & kKindAttention) {
    // Decode rows: split-K attention of one row each through its slot's page table, appending its K
    // and V, as a decode bucket (row i on slots[i] at pos[i]).
    if (decode_rows)
      with_bucket(decode_rows, [&]<int B>() {
        const cuda::AttentionParams<AttnS> p =
            attention_params(run_.arena(), l, 0, run_.buf<int32_t>(kBuf_page_tables), H200Runner::kPagesPerStream, dev->slot, dev->pos,
                             dev->rope);
        cuda::attention_decode<AttnS, B>(p, run_.stream());
      });
    // Each stream's rows through its own page table: their K and V appended, then flash attention of
    // the rows over everything the stream holds up to each row (attention_flash.cuh).
    for (size_t i = size_t(decode_rows); i < segments.size(); ++i) {
      const PieceSegment& g = segments[i];
      const int64_t r0 = g.row0;
      const int32_t* table = run_.buf<int32_t>(kBuf_page_tables) + int64_t(g.slot) * H200Runner::kPagesPerStream;
      const cuda::AttentionParams<AttnS> p =
          attention_params(run_.arena(), l, r0, table, H200Runner::kPagesPerStream, dev->slot + i, dev->pos + r0, dev->rope + r0);
      cuda::attention_append<AttnS>(p, g.n, run_.stream());
      cuda::attention_flash<AttnS>(p, g.n, int(g.pos0), run_.stream());
    }
  }
  if (kinds & kKindDense) project<kPrecisionAttnProj>(run_, A.o, int(kHidden), kQ, act_.core, n, act_.attn_out);
}

void Qwen35MoeForward::piece_moe(int l, int n, uint32_t kinds) {
  if (!(kinds & kKindMoe)) return;
  const LayerAt& L = kLayer[l];
  project<kPrecisionRouter>(run_, L.router, int(kExperts), int(kHidden), act_.hn, n, act_.router);
  constexpr Precision PS = kPrecisionSharedExpert;
  const Arena& a = run_.arena();
  cuda::moe_piece<MoeS, kPrecisionExperts, kPrecisionSharedExpert>({.x = act_.hn,
                                                                    .logits = act_.router,
                                                                    .experts = weight<uint8_t>(L.experts),
                                                                    .expert_stride = kExpertStride,
                                                                    .expert = kExpert,
                                                                    .shared_gate = weight<uint8_t>(L.shared_gate.weight),
                                                                    .shared_up = weight<uint8_t>(L.shared_up.weight),
                                                                    .shared_down = weight<uint8_t>(L.shared_down.weight),
                                                                    .shared_expert_gate = weight<bf16>(L.shared_expert_gate.weight),
                                                                    .route_idx = run_.buf<int32_t>(kBuf_route_idx),
                                                                    .route_w = run_.buf<float>(kBuf_route_w),
                                                                    .workspace = run_.buf<uint8_t>(kBuf_moe_workspace),
                                                                    .max_tokens = int(kPrefillChunk),
                                                                    .out = act_.moe_out,
                                                                    .shared_gate_block_scale = block_scales<PS>(a, L.shared_gate),
                                                                    .shared_up_block_scale = block_scales<PS>(a, L.shared_up),
                                                                    .shared_down_block_scale = block_scales<PS>(a, L.shared_down)},
                                                                   n, run_.stream());
}

// Logits only where they are wanted, kLogitRows rows a pass; with knobs, the last row's pass is the
// last one and the sampler reads that row from it.
void Qwen35MoeForward::piece_lm_head(int n, int first_logit_row, float* logits_to, const SamplingKnobs* knobs) {
  const int from = knobs ? std::min(first_logit_row, n - 1) : first_logit_row;
  for (int at = from; at < n; at += int(kLogitRows)) {
    const int rows = std::min(int(kLogitRows), n - at);
    project<kPrecisionLmHead>(run_, kLmHead, int(kVocab), int(kHidden), act_.hn + int64_t(at) * kHidden, rows, act_.logits);
    const int r0 = std::max(first_logit_row, at);
    if (r0 < at + rows)
      CUDA_CHECK(cudaMemcpyAsync(logits_to + int64_t(r0 - first_logit_row) * kVocab, act_.logits + int64_t(r0 - at) * kVocab,
                                 sizeof(float) * (at + rows - r0) * kVocab, cudaMemcpyDeviceToHost, run_.stream()));
    if (knobs && at + rows == n) pick_tokens({&knobs, 1}, rows - 1);
  }
}

// A batched piece's logits: the last row of every segment that picks or wants them, gathered into
// rows 0.. of one LM-head pass; the picks by the sampler of the smallest bucket holding the segments.
void Qwen35MoeForward::segments_lm_head(std::span<const PieceSegment> pieces, std::span<const PrefillSegment> segments) {
  const int S = int(pieces.size());
  CHECK(S <= kMaxBucket && segments.size() == pieces.size(),
        "token path: " + std::to_string(S) + " pieces for " + std::to_string(segments.size()) +
            " segments (the largest bucket samples " + std::to_string(kMaxBucket) + ")");
  bf16* rows = act_.attn_out;  // free once the last layer has run
  for (int i = 0; i < S; ++i) {
    const PieceSegment& g = pieces[size_t(i)];
    CUDA_CHECK(cudaMemcpyAsync(rows + int64_t(i) * kHidden, act_.hn + int64_t(g.row0 + g.n - 1) * kHidden, sizeof(bf16) * kHidden,
                               cudaMemcpyDeviceToDevice, run_.stream()));
  }
  project<kPrecisionLmHead>(run_, kLmHead, int(kVocab), int(kHidden), rows, S, act_.logits);
  std::vector<const SamplingKnobs*> knobs;
  for (const PrefillSegment& g : segments) knobs.push_back(g.knobs);
  pick_tokens(knobs, 0);
  float* host = run_.logits_to(0, S);
  for (int i = 0; i < S; ++i)
    if (segments[size_t(i)].want_logits)
      CUDA_CHECK(cudaMemcpyAsync(host + int64_t(i) * kVocab, act_.logits + int64_t(i) * kVocab, sizeof(float) * kVocab,
                                 cudaMemcpyDeviceToHost, run_.stream()));
}

}  // namespace rocket
