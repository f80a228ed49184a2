// The qwen3_5_moe forward pass on an H200Runner: the decode step and the token piece as sequences of
// layer ops over the plan's buffers, in the host engine's order (src/engine/host/host_engine.h). It
// owns no device resource: every buffer is the runner's arena at a plan offset, every launch goes on
// the runner's stream, and the runner captures and replays what it enqueues.
//
//   qwen3_5_moe_step.cu   the decode step and bucket-sized prefill pieces: the decode kernels over a
//                         bucket's B rows, one kernel (or two) per op, every kernel after the first a
//                         programmatic dependent launch of the one before it
//                         (kernels/cuda/primitives/dependent_launch.cuh)
//   qwen3_5_moe_piece.cu  the token path: one piece of many rows, each layer over all of them at once
//                         (cuBLAS projections, conv over the piece, chunked GDN, flash attention,
//                         token-tiled experts), its LM head only at the rows that want logits
//
// Thread safety: the runner's; one owner thread.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <span>

#include "engine.h"  // generated: found through -I ENGINE_DIR
#include "engine/h200/h200_runner.h"
#include "scheduler/batch_engine.h"

namespace rocket {

class Qwen35MoeForward {
 public:
  using bf16 = __nv_bfloat16;

  // The kernel group boundaries of a decode step (H200Runner::launch_timed's marks): per layer, its
  // input norm, mixer (projections, GDN or attention, output projection), post norm and MoE block; then
  // the final norm, LM head and sampler.
  static constexpr int kStepMarks = 6 * int(engine::kLayers) + 3;
  // Prefill pieces shorter than this go through the decode kernels: below it the token path's fixed
  // cost per layer (every active expert's weights) outweighs its rows.
  static constexpr int kTokenPieceMin = 64;

  // One stream's rows [row0, row0 + n) of a token-path piece, at positions pos0...
  struct PieceSegment {
    int slot = 0, row0 = 0, n = 0;
    int64_t pos0 = 0;
    const PrefillCapture* capture = nullptr;
  };

  // REQUIRES: the runner outlives the forward pass.
  explicit Qwen35MoeForward(H200Runner& runner);
  Qwen35MoeForward(const Qwen35MoeForward&) = delete;
  Qwen35MoeForward& operator=(const Qwen35MoeForward&) = delete;

  // Once the weights are resident: the kernels' own device state (the MoE arrival counters zeroed, the
  // expert kernel's contract).
  void fuelled();

  // The decode step of bucket b over the runner's step inputs, with only the kernels of `kinds`: the
  // embedding copies the pinned staging into step_inputs first, then every layer, the LM head into the
  // logits buffer from row `logits_row`, and the sampler's picks into the runner's host tokens.
  void enqueue_decode(int b, uint32_t kinds, int logits_row = 0);
  // A bucket-sized prefill piece of b rows of `slot` (step_inputs uploaded): every layer, then the LM
  // head over its rows when `logits`.
  void enqueue_prefill(int b, int slot, bool logits);
  // Rows [logits_row, +knobs.size()) of the logits buffer sampled by the smallest bucket's sampler
  // (row i with *knobs[i]; greedy where null) into the runner's tokens: the draw of every later token.
  void pick_tokens(std::span<const SamplingKnobs* const> knobs, int logits_row);

  // The token path (qwen3_5_moe_piece.cu). Every layer over the piece's rows (ids: all of them,
  // segment after segment), leaving hn final. `decode_rows` (0 or a bucket size): the first segments
  // are that many single rows, each one token of a distinct slot (decoding streams, then padding rows
  // on kPadSlot), whose GDN and attention run as a decode bucket does (recurrent step, split-K
  // attention), while their projections and experts ride in the piece's GEMMs: a mixed step of decode
  // rows and prompt rows reads the weights once.
  // `ids` and `rope` are the rows' (segment after segment): a row of an image token has id -1 - k, k
  // its row of the plan's image_rows (embedding.cuh); `rope` its rotary position (nullptr: every row
  // text at its position).
  void prefill_piece(std::span<const PieceSegment> segments, const int32_t* ids, const cuda::RopePosition* rope, uint32_t kinds,
                     int decode_rows = 0);
  // One stream's piece: logits of rows >= first_logit_row to logits_to (row r at logits_to +
  // (r - first_logit_row) * kVocab), `knobs` pick after the last row.
  void piece_lm_head(int n, int first_logit_row, float* logits_to, const SamplingKnobs* knobs);
  // A batched piece: each segment's last row (pieces[i] is segments[i] in the piece), picked with its
  // knobs (nullptr: greedy, unused), its logits to the host when it wants them.
  void segments_lm_head(std::span<const PieceSegment> pieces, std::span<const PrefillSegment> segments);

 private:
  // The plan's activation buffers the layer ops read and write, bound once: a decode bucket, a
  // bucket-sized prefill piece and a token-path piece use the same ones (row r is row r).
  struct Activations {
    bf16* x;         // the residual stream
    bf16* hn;        // the normed rows every mixer and MoE block reads
    bf16* mix;       // GDN: qkv projection; attention: query and gate per head
    bf16* mixc;      // GDN: qkv after the conv
    bf16* z;
    bf16* gdn_a;
    bf16* gdn_b;
    bf16* core;      // the mixer's output before its output projection
    bf16* k;
    bf16* v;
    bf16* attn_out;  // the mixer's output projection
    bf16* moe_out;
    float* router;
    float* logits;
  };

  template <int B>
  void decode_step(uint32_t kinds, int logits_row);
  template <int B>
  void prefill_step(int slot, bool logits);
  template <int B, bool kPrefill>
  void enqueue_layers(uint32_t kinds, int slot);
  template <int B, bool kPrefill>
  void gdn_layer(int l, uint32_t kinds);
  template <int B, bool kPrefill>
  void attention_layer(int l, uint32_t kinds, int slot);
  template <int B>
  void moe_block(int l, uint32_t kinds);
  void piece_gdn(int l, std::span<const PieceSegment> segments, uint32_t kinds, int decode_rows);
  void piece_attention(int l, std::span<const PieceSegment> segments, uint32_t kinds, int decode_rows);
  void piece_moe(int l, int n, uint32_t kinds);

  template <typename T>
  const T* weight(uint64_t offset) const { return run_.buf<const T>(offset); }
  // The merged image embeddings a prompt's image tokens read (H200Engine stages them); none without a tower.
  const bf16* image_rows() const {
#ifdef ROCKET_VISION_TOWER
    return run_.buf<const bf16>(engine::kBuf_image_rows);
#else
    return nullptr;
#endif
  }

  H200Runner& run_;
  const Activations act_;
};

}  // namespace rocket
