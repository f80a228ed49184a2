// The H200 engine: the qwen3_5_moe forward pass on one H200, specialised at compile time to the
// chemistry and plan in the generated engine.h. Same plan, same arena offsets and same sequencing as
// the host engine (src/engine/host/host_engine.h), with the CUDA kernels of src/kernels/cuda/.
//
// The countdown's three engine steps, in order: the constructor uprights (plan checks, one device
// allocation: the plan's arena, refused per boosters/memory_budget.h); fuel() loads weights.blob into the
// arena's [0, blob_bytes); static_fire() captures one decode graph per bucket and checks the plan's
// golden token when the plan has one (static_fire_passed()). Nothing is allocated on the device after
// that.
//
// Decode is one CUDA graph launch per step and nothing else: the step's per-row inputs (token ids,
// slots, positions, sampling knobs) are staged in mapped pinned host memory, from which the step's
// first kernel, the embedding, copies them into a fixed device buffer (the plan's step_inputs) for the
// kernels after it; the sampler writes the picked tokens straight to mapped pinned host memory.
// Inside a step every kernel after the first is a programmatic dependent launch of the one before it
// (kernels/cuda/primitives/dependent_launch.cuh): it starts, and loads its first weights, while its predecessor
// finishes. Prefill runs a chunk of n <= kPrefillChunk tokens of one stream: from kTokenPieceMin tokens
// as one piece of the token path (h200_piece.cu: the projections and experts as tensor-core GEMMs over
// all its rows), below that as pieces of the bucket sizes through the decode kernels (n = 13 runs
// 8 + 4 + 1), launched directly: every kernel then sees exactly its rows, so no row of a piece is
// padding (the MoE kernels route every row they are given).
//
// Thread safety: one owner thread drives every call; all work is ordered on one stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine.h"  // generated: found through -I ENGINE_DIR
#include "boosters/memory_budget.h"
#include "engine/h200/arena.h"
#include "engine/h200/weight_loader.h"
#include "kernels/cuda/primitives/cuda_handles.h"
#include "kernels/cuda/sample.cuh"
#include "kernels/tiling/gdn.h"
#include "core/error.h"
#include "scheduler/batch_engine.h"
#include "plan/plan.h"

namespace rocket {

// The kernel kinds a step is made of, as the benchmark splits it. Router top-k, dispatch and the
// expert kernels (with the router projection) are kMoe; every other projection but the LM head is kDense.
enum StepKind : uint32_t {
  kKindNorm = 1,       // embedding gather and the (fused residual) RMSNorms
  kKindGdn = 2,        // conv1d + recurrent step
  kKindAttention = 4,  // split-K attention + combine (prefill: KV append)
  kKindDense = 8,
  kKindMoe = 16,
  kKindLmHead = 32,
  kKindSampling = 64,
  kKindAll = 127,
};

class H200Engine {
 public:
  static constexpr int kPadSlot = int(engine::kMaxStreams);  // sink for a bucket's inactive rows
  static constexpr int kSlots = int(engine::kMaxStreams) + 1;
  static constexpr int kPagesPerStream = int((engine::kMaxContext + engine::kKvPageTokens - 1) / engine::kKvPageTokens);
  static constexpr int kCachePages = kSlots * kPagesPerStream;

  // Upright, holding `reserve_bytes` of device memory back for other work on top of the measured
  // reserve and floor. Throws Error("upright: ...") when the plan does not belong to this engine or
  // does not fit.
  H200Engine(const std::string& engine_dir, uint64_t reserve_bytes);
  H200Engine(const H200Engine&) = delete;
  H200Engine& operator=(const H200Engine&) = delete;
  ~H200Engine();

  // "memory: free … = usable …; plan residency …", as upright measured it.
  const std::string& upright_summary() const { return upright_summary_; }
  // The budget upright measured (free after context creation, reserve, floor) and admitted the plan against.
  const MemoryBudget& budget() const { return budget_; }
  // Weights resident; `load` picks how weights.blob is read.
  const LoadReport& fuel(const LoadOptions& load);
  // Every bucket's graph captured and run once; then the golden token. Returns what it did and found.
  std::string static_fire();

  const Plan& plan() const { return plan_; }
  // The bounds of every call (scheduler/step_contract.h); prefill_batch runs the contract's layout.
  const StepContract& contract() const { return contract_; }
  const LoadReport& load_report() const { return load_report_; }
  // Whether greedy decoding of the plan's static-fire prompt gave the reference's token (true when the
  // build had no goldens). A launch refuses to serve otherwise; the diagnostic commands report it and
  // go on, so one run shows how far off the engine is.
  bool static_fire_passed() const { return static_fire_passed_; }
  int bucket_for(int n) const;

  // Prefill pieces shorter than this go through the decode kernels: below it the token path's fixed
  // cost per layer (every active expert's weights) outweighs its rows.
  static constexpr int kTokenPieceMin = 64;

  // n <= kPrefillChunk consecutive tokens of the stream in `slot` at positions pos0.. pos0+n-1. The
  // logits of rows >= first_logit_row are copied to the host (logits(row)); n means none. `knobs`
  // (nullptr: none) pick the token after the last row on the device, as decode picks its rows', into
  // tokens()[0]. `capture` (nullptr: none) copies the stream's conv + recurrent state after
  // capture->tokens of the n rows into snapshot capture->snapshot.
  void prefill(int slot, const int32_t* ids, int n, int64_t pos0, int first_logit_row,
               const SamplingKnobs* knobs = nullptr, const PrefillCapture* capture = nullptr);
  // Several streams' prefill rows as one token-path piece (BatchEngine::prefill_batch): afterwards
  // tokens()[i] is segment i's pick and logits(i) its last row's logits when it wanted them. The first
  // `decode_rows` segments are decode rows (a mixed step): they run as a decode bucket inside the piece
  // (prefill_piece's decode_rows), padded to the bucket with rows on kPadSlot.
  // Throws StepRefused, before any work, for a call outside the plan's StepContract.
  void prefill_batch(std::span<const PrefillSegment> segments, int decode_rows);
  // The token path alone, for the benchmark: one piece of n tokens (kTokenPieceMin <= n <=
  // kPrefillChunk) of `slot` at pos0 with only the kernels of `kinds`, no logits; returns when done.
  void bench_piece(int slot, const int32_t* ids, int n, int64_t pos0, uint32_t kinds);

  // One token for each of n streams, as the smallest bucket >= n (rows beyond n run on the padding
  // slot). `knobs` (n rows, or nullptr for greedy) pick each row's next token into tokens(). Logits
  // stay on the device until download_logits.
  // Throws StepRefused, before any work, for a call outside the plan's StepContract.
  // `timed`: run the bucket's timing graph instead (the same kernels with a CUDA event between kernel
  // groups, captured on first use), whose split step_split() then reads.
  void decode(int n, const int32_t* ids, const int* slots, const int64_t* pos, const SamplingKnobs* knobs,
              bool timed = false);
  // Structured outputs: the allowed-token bitmask of each row the next decode, prefill or
  // prefill_batch picks (that call's row or segment order; a null entry, or rows past the span, pick
  // freely), copied into the mapped mask rows the sampler reads (no copy, no launch). Applies to that
  // one call. REQUIRES: each mask has mask_words(kVocab) words and allows a token.
  void mask_next_picks(std::span<const uint32_t* const> masks);
  // The last decode's time per kernel group (telemetry/step_split.h; waits for the step).
  // REQUIRES: that decode was timed.
  StepSplit step_split();
  // The tokens the last decode (or prefill with knobs) picked, row order (waits for the step). The
  // sampler writes them to this pinned buffer, so they hold until the next decode or prefill is issued.
  const int32_t* tokens();
  // Copies decode rows [0, n) of the logits to the host (waits for the step).
  void download_logits(int n);
  // Row `row` of the last decode, or of the last prefill (one of its rows >= first_logit_row).
  const float* logits(int row) const {
    CHECK(row >= logits_base_ && row < logits_base_ + logits_rows_, "logits of a row the last step did not bring back");
    return logits_at_ + int64_t(row - logits_base_) * engine::kVocab;
  }

  // A fresh sequence in `slot`: zero conv and recurrent state (KV is overwritten as it is written).
  void reset_slot(int slot);
  // Paged KV as the host engine: slot s owns cache pages [s·P, (s+1)·P) until bound otherwise.
  // REQUIRES: n <= kPagesPerStream, every page < kCachePages.
  void bind_pages(int slot, const int* pages, int n);
  void copy_page(int src, int dst, int tokens);
  void capture_state(int slot, int snapshot);
  void restore_state(int snapshot, int slot);
  void copy_state(int from_slot, int to_slot);
  // BatchEngine::reset_history: the slot's counts zeroed, the prompt's bits and the bias uploaded, in
  // stream order before the next step. REQUIRES: slot < kMaxBucket.
  void reset_history(int slot, std::span<const int32_t> prompt, std::span<const LogitBias> bias);

  // For the benchmark. A graph of bucket b holding only the kernels of `kinds` (captured on first
  // use); the decode graph is kinds == kKindAll. Launched again, it reads the last decode's inputs.
  cudaGraphExec_t graph(int b, uint32_t kinds);
  cudaStream_t stream() const { return stream_.get(); }
  const Arena& arena() const { return *arena_; }

  // The device inputs of a token-path piece (the plan's piece_inputs) and its pinned host twin: rows
  // are the segments' rows one after another.
  struct PieceInputs {
    int32_t ids[engine::kPrefillChunk];
    int32_t pos[engine::kPrefillChunk];  // pos0 + r: a bucket-sized attention block reads its first row's
    int32_t slot[kSlots];                // segment i's slot (its conv and GDN kernels read slots[i])
    int32_t capture_at[kSlots][tiling::gdn_chunks(int(engine::kPrefillChunk))];  // segment i's GDN chunks: snapshot or -1
  };

 private:
  struct StepInputs;
  // `logits_row`: the first row of the logits buffer this step's LM head writes and its sampler reads.
  template <int B>
  void enqueue_decode(uint32_t kinds, int logits_row = 0);
  template <int B>
  void enqueue_prefill(int slot, bool logits);
  template <int B, bool kPrefill>
  void enqueue_layers(uint32_t kinds, int slot);
  template <int B, bool kPrefill>
  void gdn_layer(int l, uint32_t kinds);
  template <int B, bool kPrefill>
  void attention_layer(int l, uint32_t kinds, int slot);
  template <int B>
  void moe_block(int l, uint32_t kinds);
  // The token path (h200_piece.cu): one stream's rows [row0, row0 + n) of a piece at pos0...
  struct PieceSegment {
    int slot = 0, row0 = 0, n = 0;
    int64_t pos0 = 0;
    const PrefillCapture* capture = nullptr;
  };
  // Every layer over the piece's rows (ids: all of them, segment after segment), leaving hn final.
  // `decode_rows` (0 or a bucket size): the first segments are that many single rows, each one token
  // of a distinct slot (decoding streams, then padding rows on kPadSlot), whose GDN and attention run
  // as a decode bucket does (recurrent step, split-K attention), while their projections and experts
  // ride in the piece's GEMMs: a mixed step of decode rows and prompt rows reads the weights once.
  void prefill_piece(std::span<const PieceSegment> segments, const int32_t* ids, uint32_t kinds, int decode_rows = 0);
  void piece_gdn(int l, std::span<const PieceSegment> segments, uint32_t kinds, int decode_rows);
  void piece_attention(int l, std::span<const PieceSegment> segments, uint32_t kinds, int decode_rows);
  void piece_moe(int l, int n, uint32_t kinds);
  // One stream's piece: logits of rows >= first_logit_row to logits_to (row r at logits_to +
  // (r - first_logit_row) * kVocab), `knobs` pick after the last row.
  void piece_lm_head(int n, int first_logit_row, float* logits_to, const SamplingKnobs* knobs);
  // A batched piece: each segment's last row (pieces[i] is segments[i] in the piece), picked with its
  // knobs (nullptr: greedy, unused), its logits to the host when it wants them.
  void segments_lm_head(std::span<const PieceSegment> pieces, std::span<const PrefillSegment> segments);
  // Rows [logits_row, +knobs.size()) of the logits buffer sampled by the smallest bucket's sampler
  // (row i with *knobs[i]; greedy where null) into tokens(): the draw of every later decode token.
  void pick_tokens(std::span<const SamplingKnobs* const> knobs, int logits_row);
  // Row `row`'s knobs as the sampler reads them: `k` (greedy where null), masked where the next call's
  // masks give the row one.
  SamplingKnobs staged_knobs(const SamplingKnobs* k, int row) const;
  // The pinned twin of step_inputs, once the previous step's reads of it have finished. A decode's
  // embedding reads it; prefill's upload_step() copies it to the device on the stream. Whatever reads
  // it is followed by staged_read_enqueued().
  StepInputs& staging();
  void staged_read_enqueued();
  void upload_step();

  template <typename T>
  T* buf(uint64_t offset) const { return arena_->at<T>(offset); }
  template <typename T>
  const T* weight(uint64_t offset) const { return arena_->at<const T>(offset); }

  // Every device resource is an RAII member (kernels/cuda/primitives/cuda_handles.h), made in
  // declaration order by the constructor's initialisers in the order upright prescribes (context, the
  // free memory, what lives outside the arena, the budget, the arena), so a throw at any step releases
  // what the steps before it made, and the destructor has nothing to free by hand.
  std::string dir_;
  Plan plan_;  // checked against this engine's build
  StepContract contract_;  // of plan_
  uint64_t free_at_context_;  // device memory free right after context creation
  Stream stream_;
  Event staged_;  // recorded after each read of host_step_ is enqueued
  HostMemory<StepInputs> host_step_;  // pinned, mapped
  HostMemory<float> host_logits_;     // pinned [kLogitRows][kVocab]
  HostMemory<int32_t> host_tokens_;   // pinned, mapped [max bucket]: the sampler's output
  HostMemory<uint32_t> host_masks_;   // pinned, mapped [max bucket][mask words]: mask_next_picks' rows
  HostMemory<PieceInputs> host_piece_;  // pinned twin of the plan's piece_inputs
  Cublas cublas_;
  MemoryBudget budget_;
  std::string upright_summary_;
  std::unique_ptr<Arena> arena_;
  LoadReport load_report_;
  std::vector<float> wide_logits_;   // a prefill's logits when they exceed one LM-head pass
  float* logits_at_ = nullptr;       // the last step's logits on the host: rows [logits_base_, +logits_rows_)
  int logits_base_ = 0, logits_rows_ = 0;
  std::vector<bool> masked_rows_;    // [max bucket]: rows of the next call with a mask in host_masks_
  int step_rows_ = 0;                // rows of the last decode staged
  bool static_fire_passed_ = true;
  std::vector<int> page_tables_;     // host mirror of the device page tables [slot][kPagesPerStream]
  std::vector<std::pair<uint64_t, GraphExec>> graphs_;  // (bucket << 32 | kinds) -> graph
  // A decode graph of one bucket with an event recorded after each kernel group: events[i + 1] ends
  // groups[i], events[0] starts the step.
  struct TimingGraph {
    int bucket = 0;
    GraphExec exec;  // captured once the events exist
    std::vector<Event> events;
    std::vector<StepGroup> groups;
  };
  TimingGraph& timing_graph(int b);
  // While a timing graph is captured: an event after the kernel group `group` just enqueued. Else nothing.
  void mark(StepGroup group);
  TimingGraph* capturing_ = nullptr;
  TimingGraph* timed_ = nullptr;  // the last decode's, when it was timed
  std::vector<std::unique_ptr<TimingGraph>> timing_graphs_;
};

}  // namespace rocket
