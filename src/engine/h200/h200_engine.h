// The H200 engine: the qwen3_5_moe forward pass on one H200, specialised at compile time to the
// chemistry and plan in the generated engine.h. Same plan, same arena offsets and same sequencing as
// the host engine (src/engine/host/host_engine.h), with the CUDA kernels of src/kernels/cuda/.
// It is two parts and the calls that drive them: the runner (h200_runner.h: the machine, whatever the
// model: resources, pinned staging, graphs, page tables, state copies, timing) and the forward pass
// (qwen3_5_moe_forward.h: the decode step and the token piece as layer ops over plan buffers).
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
// as one piece of the token path (qwen3_5_moe_piece.cu: the projections and experts as tensor-core GEMMs over
// all its rows), below that as pieces of the bucket sizes through the decode kernels (n = 13 runs
// 8 + 4 + 1), launched directly: every kernel then sees exactly its rows, so no row of a piece is
// padding (the MoE kernels route every row they are given).
//
// Thread safety: one owner thread drives every call; all work is ordered on one stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>

#include "engine.h"  // generated: found through -I ENGINE_DIR
#include "boosters/memory_budget.h"
#include "core/error.h"
#include "engine/h200/arena.h"
#include "engine/h200/h200_images.h"
#include "engine/h200/h200_runner.h"
#include "engine/h200/qwen3_5_moe_forward.h"
#include "engine/h200/weight_loader.h"
#include "kernels/cuda/sample.cuh"
#include "plan/plan.h"
#include "scheduler/batch_engine.h"

namespace rocket {

class H200Engine {
 public:
  static constexpr int kPadSlot = H200Runner::kPadSlot;  // sink for a bucket's inactive rows
  static constexpr int kSlots = H200Runner::kSlots;
  static constexpr int kPagesPerStream = H200Runner::kPagesPerStream;
  static constexpr int kCachePages = H200Runner::kCachePages;
  // Prefill pieces shorter than this go through the decode kernels (Qwen35MoeForward::kTokenPieceMin).
  static constexpr int kTokenPieceMin = Qwen35MoeForward::kTokenPieceMin;

  // Upright, holding `reserve_bytes` of device memory back for other work on top of the measured
  // reserve and floor. Throws Error("upright: ...") when the plan does not belong to this engine or
  // does not fit.
  H200Engine(const std::string& engine_dir, uint64_t reserve_bytes);
  H200Engine(const H200Engine&) = delete;
  H200Engine& operator=(const H200Engine&) = delete;

  // "memory: free … = usable …; plan residency …", as upright measured it.
  const std::string& upright_summary() const { return runner_.upright_summary(); }
  // The budget upright measured (free after context creation, reserve, floor) and admitted the plan against.
  const MemoryBudget& budget() const { return runner_.budget(); }
  // Weights resident; `load` picks how weights.blob is read.
  const LoadReport& fuel(const LoadOptions& load);
  // Every bucket's graph captured and run once; then the golden token. Returns what it did and found.
  std::string static_fire();

  const Plan& plan() const { return runner_.plan(); }
  // The bounds of every call (scheduler/step_contract.h); prefill_batch runs the contract's layout.
  const StepContract& contract() const { return runner_.contract(); }
  const LoadReport& load_report() const { return runner_.load_report(); }
  // Whether greedy decoding of the plan's static-fire prompt gave the reference's token (true when the
  // build had no goldens). A launch refuses to serve otherwise; the diagnostic commands report it and
  // go on, so one run shows how far off the engine is.
  bool static_fire_passed() const { return static_fire_passed_; }
  int bucket_for(int n) const;

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
  // (Qwen35MoeForward::prefill_piece's decode_rows), padded to the bucket with rows on kPadSlot.
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
  void mask_next_picks(std::span<const uint32_t* const> masks) { runner_.mask_next_picks(masks); }
  // The last decode's time per kernel group (telemetry/step_split.h; waits for the step).
  // REQUIRES: that decode was timed.
  StepSplit step_split() { return runner_.step_split(); }
  // The tokens the last decode (or prefill with knobs) picked, row order (waits for the step). The
  // sampler writes them to this pinned buffer, so they hold until the next decode or prefill is issued.
  const int32_t* tokens() { return runner_.tokens(); }
  // Copies decode rows [0, n) of the logits to the host (waits for the step).
  void download_logits(int n);
  // Row `row` of the last decode, or of the last prefill (one of its rows >= first_logit_row).
  const float* logits(int row) const { return runner_.logits(row); }

  // A fresh sequence in `slot`: zero conv and recurrent state (KV is overwritten as it is written), no images.
  void reset_slot(int slot) {
    runner_.reset_slot(slot);
    images_.forget(slot);
  }
  // BatchEngine::set_images (h200_images.h): the prompt's rotary positions and images for the slot's
  // prefill, its rope delta for every token after it. REQUIRES: after reset_slot or restore_state.
  void set_images(int slot, std::span<const int32_t> prompt, const vision::PromptImages& images, int64_t computed = 0) {
    images_.set(slot, prompt, images, computed);
  }
  int64_t rope_delta(int slot) const { return images_.rope_delta(slot); }
  // Paged KV as the host engine: slot s owns cache pages [s·P, (s+1)·P) until bound otherwise.
  // REQUIRES: n <= kPagesPerStream, every page < kCachePages.
  void bind_pages(int slot, const int* pages, int n) { runner_.bind_pages(slot, pages, n); }
  void copy_page(int src, int dst, int tokens) { runner_.copy_page(src, dst, tokens); }
  void capture_state(int slot, int snapshot) { runner_.capture_state(slot, snapshot); }
  void restore_state(int snapshot, int slot) {
    runner_.restore_state(snapshot, slot);
    images_.forget(slot);
  }
  void copy_state(int from_slot, int to_slot) {  // the slot's images too
    runner_.copy_state(from_slot, to_slot);
    images_.copy(from_slot, to_slot);
  }
  // BatchEngine::reset_history: the slot's counts zeroed, the prompt's bits and the bias uploaded, in
  // stream order before the next step. REQUIRES: slot < kMaxBucket.
  void reset_history(int slot, std::span<const int32_t> prompt, std::span<const LogitBias> bias) {
    runner_.reset_history(slot, prompt, bias);
  }

  // For the benchmark. A graph of bucket b holding only the kernels of `kinds` (captured on first
  // use); the decode graph is kinds == kKindAll. Launched again, it reads the last decode's inputs.
  cudaGraphExec_t graph(int b, uint32_t kinds);
  cudaStream_t stream() const { return runner_.stream(); }
  const Arena& arena() const { return runner_.arena(); }

 private:
  using PieceSegment = Qwen35MoeForward::PieceSegment;

  H200Runner runner_;
  Qwen35MoeForward forward_;  // enqueues on runner_
  H200Images images_;         // each slot's prompt images and rotary positions
  int step_rows_ = 0;         // rows of the last decode staged
  bool static_fire_passed_ = true;
};

}  // namespace rocket
