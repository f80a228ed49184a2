// The H200 runner: the machine an H200 engine runs on, apart from the model it runs. It uprights (the
// plan checked against this build, the device context, every resource outside the arena, the memory
// budget, the arena), loads the weights, and then holds what every step needs whatever the chemistry:
// the stream all work is ordered on, the pinned staging a step's inputs and outputs cross in, cuBLAS,
// the CUDA graphs captured per bucket and replayed, the timing graphs of the step split, the page
// tables, and the slots' recurrent state with its snapshots. The forward pass
// (qwen3_5_moe_forward.h) enqueues its layer ops on it; H200Engine (h200_engine.h) drives both.
//
// Every device resource is an RAII member (kernels/cuda/primitives/cuda_handles.h), made in declaration
// order by the constructor's initialisers in the order upright prescribes (engine/h200/README.md), so
// a throw at any step releases what the steps before it made, and nothing is freed by hand.
//
// Thread safety: one owner thread drives every call; all work is ordered on one stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine.h"  // generated: found through -I ENGINE_DIR
#include "boosters/memory_budget.h"
#include "core/error.h"
#include "core/sampling_history.h"
#include "core/sampling_knobs.h"
#include "engine/h200/arena.h"
#include "engine/h200/weight_loader.h"
#include "kernels/cuda/primitives/cuda_handles.h"
#include "kernels/cuda/rope.cuh"
#include "kernels/tiling/gdn.h"
#include "plan/plan.h"
#include "scheduler/step_contract.h"
#include "telemetry/step_split.h"

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

class H200Runner {
 public:
  static constexpr int kPadSlot = int(engine::kMaxStreams);  // sink for a bucket's inactive rows
  static constexpr int kSlots = int(engine::kMaxStreams) + 1;
  static constexpr int kPagesPerStream = int((engine::kMaxContext + engine::kKvPageTokens - 1) / engine::kKvPageTokens);
  static constexpr int kCachePages = kSlots * kPagesPerStream;
  static constexpr int kMaxBucket = engine::kBuckets[std::size(engine::kBuckets) - 1];

  // The fixed device buffer of per-row step inputs (the plan's step_inputs) and its pinned host twin.
  struct alignas(16) StepInputs {  // whole 16-byte vectors: the decode's embedding copies it as such
    int32_t ids[kMaxBucket];
    int32_t slots[kMaxBucket];  // decode: each row's slot; prefill: slots[0]
    int32_t pos[kMaxBucket];    // decode: each row's position; prefill: pos[0], the piece's first
    SamplingKnobs sample[kMaxBucket];  // decode: each row's; prefill: sample[0], the last piece's pick
    cuda::RopePosition rope[kMaxBucket];  // each row's rotary position (a text row's: its position + rope delta)
  };
  // The device inputs of a token-path piece (the plan's piece_inputs) and its pinned host twin: rows
  // are the segments' rows one after another.
  struct PieceInputs {
    int32_t ids[engine::kPrefillChunk];
    int32_t pos[engine::kPrefillChunk];  // pos0 + r: a bucket-sized attention block reads its first row's
    cuda::RopePosition rope[engine::kPrefillChunk];  // each row's rotary position
    int32_t slot[kSlots];                // segment i's slot (its conv and GDN kernels read slots[i])
    int32_t capture_at[kSlots][tiling::gdn_chunks(int(engine::kPrefillChunk))];  // segment i's GDN chunks: snapshot or -1
  };

  // Upright, holding `reserve_bytes` of device memory back for other work on top of the measured
  // reserve and floor. Throws Error("upright: ...") when the plan does not belong to this engine or
  // does not fit.
  H200Runner(const std::string& engine_dir, uint64_t reserve_bytes);
  H200Runner(const H200Runner&) = delete;
  H200Runner& operator=(const H200Runner&) = delete;

  const Plan& plan() const { return plan_; }
  const StepContract& contract() const { return contract_; }
  const MemoryBudget& budget() const { return budget_; }
  const std::string& upright_summary() const { return upright_summary_; }
  const Arena& arena() const { return *arena_; }
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }
  // The plan buffer at `offset` (engine.h kBuf_*) or a weight (a LinearAt's offset), as a device pointer.
  template <typename T>
  T* buf(uint64_t offset) const { return arena_->at<T>(offset); }

  // Weights resident (`load` picks how weights.blob is read), cuBLAS's workspace the plan's, every slot
  // on its own pages with zero state.
  const LoadReport& fuel(const LoadOptions& load);
  const LoadReport& load_report() const { return load_report_; }

  // ---- pinned staging

  // The pinned twin of step_inputs, once the previous step's reads of it have finished. A decode's
  // embedding reads it; prefill's upload_step() copies it to the device on the stream. Whatever reads
  // it is followed by staged_read_enqueued().
  StepInputs& staging();
  void staged_read_enqueued();
  void upload_step();
  // The pinned twin itself, for the kernel that reads it in place (mapped: its own device address).
  const StepInputs* host_step() const { return host_step_.get(); }
  // Mapped [kMaxBucket]: the sampler's picks.
  int32_t* host_tokens() const { return host_tokens_.get(); }
  // Mapped [kMaxBucket][mask words]: the grammar masks the sampler reads.
  const uint32_t* host_masks() const { return host_masks_.get(); }
  // The pinned twin of piece_inputs, once the stream has finished the copies out of it.
  PieceInputs& piece_staging();

  // Structured outputs (H200Engine::mask_next_picks): the next call's masked rows.
  void mask_next_picks(std::span<const uint32_t* const> masks);
  // Row `row`'s knobs as the sampler reads them: `k` (greedy where null), masked where the next call's
  // masks give the row one.
  SamplingKnobs staged_knobs(const SamplingKnobs* k, int row) const;
  // The call the masks were for has been issued: later calls pick freely.
  void masks_used() { masked_rows_.assign(kMaxBucket, false); }

  // ---- results on the host

  // The tokens the last call's sampler picked, row order (waits for the stream).
  const int32_t* tokens();
  // Where logits rows [base, base + rows) of the call being issued land on the host: the pinned buffer
  // when one LM-head pass holds them (serving wants one row), else pageable memory (the parity runner
  // wants every row of a long piece). logits(row) reads them once the stream is done.
  float* logits_to(int base, int rows);
  // Copies rows [0, n) of the device logits to the host as rows [0, n) (waits for the stream).
  void download_logits(int n);
  const float* logits(int row) const {
    CHECK(row >= logits_base_ && row < logits_base_ + logits_rows_, "logits of a row the last step did not bring back");
    return logits_at_ + int64_t(row - logits_base_) * engine::kVocab;
  }

  // ---- graphs

  // The graph of bucket b holding the work `enqueue` puts on the stream for `kinds`, captured on first
  // use (later calls return it and ignore `enqueue`).
  cudaGraphExec_t graph(int b, uint32_t kinds, const std::function<void()>& enqueue);
  // Launches bucket b's graph of `kinds` (graph()).
  void launch(int b, uint32_t kinds, const std::function<void()>& enqueue);
  // Launches bucket b's timing graph instead, whose split step_split() then reads: the same work with an
  // event recorded before it and at each of the `marks` mark() calls `enqueue` makes, one after each
  // kernel group; captured on first use.
  void launch_timed(int b, int marks, const std::function<void()>& enqueue);
  // While a timing graph is captured: an event after the kernel group `group` just enqueued. Else nothing.
  void mark(StepGroup group);
  // The last launch's time per kernel group (telemetry/step_split.h; waits for the step).
  // REQUIRES: that launch was timed.
  StepSplit step_split();

  // ---- slots, pages, state

  // A fresh sequence in `slot`: zero conv and recurrent state (KV is overwritten as it is written).
  void reset_slot(int slot);
  // Paged KV: slot s owns cache pages [s·P, (s+1)·P) until bound otherwise.
  // REQUIRES: n <= kPagesPerStream, every page < kCachePages.
  void bind_pages(int slot, const int* pages, int n);
  void copy_page(int src, int dst, int tokens);
  void capture_state(int slot, int snapshot);
  void restore_state(int snapshot, int slot);
  void copy_state(int from_slot, int to_slot);
  // BatchEngine::reset_history: the slot's counts zeroed, the prompt's bits and the bias uploaded, in
  // stream order before the next step. REQUIRES: slot < kMaxBucket.
  void reset_history(int slot, std::span<const int32_t> prompt, std::span<const LogitBias> bias);

 private:
  // A decode graph of one bucket with an event recorded after each kernel group: events[i + 1] ends
  // groups[i], events[0] starts the step.
  struct TimingGraph {
    int bucket = 0;
    GraphExec exec;  // captured once the events exist
    std::vector<Event> events;
    std::vector<StepGroup> groups;
  };

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
  std::vector<int> page_tables_;     // host mirror of the device page tables [slot][kPagesPerStream]
  std::vector<std::pair<uint64_t, GraphExec>> graphs_;  // (bucket << 32 | kinds) -> graph
  TimingGraph* capturing_ = nullptr;
  TimingGraph* timed_ = nullptr;  // the last launch's, when it was timed
  std::vector<std::unique_ptr<TimingGraph>> timing_graphs_;
  TimingGraph& timing_graph(int b, int marks, const std::function<void()>& enqueue);
};

}  // namespace rocket
