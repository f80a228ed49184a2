#include "engine/h200/h200_runner.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "engine/h200/device_budget.h"
#include "engine/h200/forward_shapes.h"
#include "engine/upright.h"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/sample.cuh"

namespace fs = std::filesystem;

namespace rocket {

using namespace engine;
using namespace h200;

static_assert(kBufBytes_page_tables >= uint64_t(H200Runner::kSlots) * H200Runner::kPagesPerStream * 4);
static_assert(sizeof(H200Runner::StepInputs) <= kBufBytes_step_inputs);
static_assert(sizeof(H200Runner::PieceInputs) <= kBufBytes_piece_inputs, "the compiler sized piece_inputs for another piece");
static_assert(H200Runner::kMaxBucket == h200::kMaxBucket);

namespace {

// plan.json of the engine directory, refused (Error "upright: ...") unless it is the plan this engine
// was compiled for.
Plan checked_plan(const std::string& dir) {
  Plan plan = Plan::load((fs::path(dir) / "plan.json").string());
  check_plan(plan, EngineBuild{.fingerprint = kFingerprint,
                               .booster = kBooster,
                               .blob_bytes = kBlobBytes,
                               .arena_bytes = kArenaBytes,
                               .slots = H200Runner::kSlots,
                               .pages_per_stream = H200Runner::kPagesPerStream,
                               .kv_layers = int(kKvLayers)});
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

// Upright in the order engine/h200/README.md prescribes (context, free memory, what lives outside the
// arena, budget, arena): the members' initialisers run in that order (h200_runner.h).
H200Runner::H200Runner(const std::string& engine_dir, uint64_t reserve_bytes)
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

const LoadReport& H200Runner::fuel(const LoadOptions& load) {
  load_report_ = load_weights((fs::path(dir_) / "weights.blob").string(), kBlobBytes, *arena_, load);
  CUBLAS_CHECK(cublasSetWorkspace(cublas_.get(), buf<uint8_t>(kBuf_gemm_workspace), kBufBytes_gemm_workspace));
  page_tables_.resize(size_t(kSlots) * kPagesPerStream);
  for (size_t i = 0; i < page_tables_.size(); ++i) page_tables_[i] = int(i);
  CUDA_CHECK(cudaMemcpyAsync(buf<int32_t>(kBuf_page_tables), page_tables_.data(), page_tables_.size() * 4,
                             cudaMemcpyHostToDevice, stream_.get()));
  for (int s = 0; s < kSlots; ++s) reset_slot(s);
  return load_report_;
}

// ---------------------------------------------------------------------------------------------------
// Pinned staging

H200Runner::StepInputs& H200Runner::staging() {
  // The previous step reads the pinned twin asynchronously (prefill's copy, decode's embedding): wait
  // for that before rewriting it.
  CUDA_CHECK(cudaEventSynchronize(staged_.get()));
  return *host_step_.get();
}

void H200Runner::staged_read_enqueued() { CUDA_CHECK(cudaEventRecord(staged_.get(), stream_.get())); }

void H200Runner::upload_step() {
  CUDA_CHECK(cudaMemcpyAsync(buf<StepInputs>(kBuf_step_inputs), host_step_.get(), sizeof(StepInputs), cudaMemcpyHostToDevice,
                             stream_.get()));
  staged_read_enqueued();
}

H200Runner::PieceInputs& H200Runner::piece_staging() {
  // The previous piece's copies out of host_piece_ must have run before it is rewritten (a prefill
  // split around a capture runs two pieces in one call; otherwise the stream is idle already).
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  return *host_piece_.get();
}

void H200Runner::mask_next_picks(std::span<const uint32_t* const> masks) {
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

SamplingKnobs H200Runner::staged_knobs(const SamplingKnobs* k, int row) const {
  SamplingKnobs r = k ? *k : SamplingKnobs{.temperature = 0.0f};
  r.masked = masked_rows_[size_t(row)] ? 1 : 0;
  return r;
}

// ---------------------------------------------------------------------------------------------------
// Results on the host

const int32_t* H200Runner::tokens() {
  // The sampler wrote them to the mapped host_tokens_; the step's end makes them visible here.
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  return host_tokens_.get();
}

float* H200Runner::logits_to(int base, int rows) {
  logits_base_ = base;
  logits_rows_ = rows;
  if (rows <= kLogitRows) {
    logits_at_ = host_logits_.get();
  } else {
    wide_logits_.resize(size_t(rows) * kVocab);
    logits_at_ = wide_logits_.data();
  }
  return logits_at_;
}

void H200Runner::download_logits(int n) {
  CUDA_CHECK(cudaMemcpyAsync(logits_to(0, n), buf<float>(kBuf_logits), sizeof(float) * n * kVocab, cudaMemcpyDeviceToHost,
                             stream_.get()));
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
}

// ---------------------------------------------------------------------------------------------------
// Graphs

cudaGraphExec_t H200Runner::graph(int b, uint32_t kinds, const std::function<void()>& enqueue) {
  const uint64_t key = uint64_t(b) << 32 | kinds;
  for (auto& [k, g] : graphs_)
    if (k == key) return g.get();
  graphs_.emplace_back(key, capture_graph(stream_.get(), enqueue));
  return graphs_.back().second.get();
}

void H200Runner::launch(int b, uint32_t kinds, const std::function<void()>& enqueue) {
  const cudaGraphExec_t g = graph(b, kinds, enqueue);
  timed_ = nullptr;
  CUDA_CHECK(cudaGraphLaunch(g, stream_.get()));
}

void H200Runner::launch_timed(int b, int marks, const std::function<void()>& enqueue) {
  timed_ = &timing_graph(b, marks, enqueue);
  CUDA_CHECK(cudaGraphLaunch(timed_->exec.get(), stream_.get()));
}

H200Runner::TimingGraph& H200Runner::timing_graph(int b, int marks, const std::function<void()>& enqueue) {
  for (auto& t : timing_graphs_)
    if (t->bucket == b) return *t;
  auto t = std::make_unique<TimingGraph>();
  t->bucket = b;
  // Events exist before the capture (nothing but stream work inside it): one per group boundary.
  t->events.reserve(size_t(marks) + 1);
  for (int i = 0; i <= marks; ++i) t->events.emplace_back(cudaEventDefault);
  t->exec = capture_graph(stream_.get(), [&] {
    // cudaEventRecordExternal: a record node in the graph (a plain record in a capture only orders streams).
    CUDA_CHECK(cudaEventRecordWithFlags(t->events[0].get(), stream_.get(), cudaEventRecordExternal));
    capturing_ = t.get();
    try {
      enqueue();
    } catch (...) {
      capturing_ = nullptr;
      throw;
    }
    capturing_ = nullptr;
  });
  CHECK(int(t->groups.size()) == marks, "the timing graph's marks are the group boundaries of a decode step");
  timing_graphs_.push_back(std::move(t));
  return *timing_graphs_.back();
}

void H200Runner::mark(StepGroup group) {
  if (!capturing_) return;
  const size_t i = capturing_->groups.size() + 1;
  CHECK(i < capturing_->events.size(), "more group boundaries than the timing graph has events");
  CUDA_CHECK(cudaEventRecordWithFlags(capturing_->events[i].get(), stream_.get(), cudaEventRecordExternal));
  capturing_->groups.push_back(group);
}

StepSplit H200Runner::step_split() {
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

// ---------------------------------------------------------------------------------------------------
// Slots, pages, state

void H200Runner::reset_slot(int slot) {
  CHECK(slot >= 0 && slot < kSlots);
  CUDA_CHECK(cudaMemsetAsync(buf<float>(kBuf_gdn_state) + slot * kLinearLayers * kGdnStateFloats, 0,
                             sizeof(float) * kLinearLayers * kGdnStateFloats, stream_.get()));
  CUDA_CHECK(cudaMemsetAsync(buf<float>(kBuf_conv_state) + slot * kLinearLayers * kConvStateFloats, 0,
                             sizeof(float) * kLinearLayers * kConvStateFloats, stream_.get()));
}

void H200Runner::reset_history(int slot, std::span<const int32_t> prompt, std::span<const LogitBias> bias) {
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

void H200Runner::bind_pages(int slot, const int* pages, int n) {
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

void H200Runner::copy_page(int src, int dst, int tokens) {
  CHECK(src >= 0 && src < kCachePages && dst >= 0 && dst < kCachePages && tokens >= 0 && tokens <= kKvPageTokens);
  uint8_t* kv = buf<uint8_t>(kBuf_kv_cache);
  for (int64_t l = 0; l < kFullLayers; ++l)
    for (int h = 0; h < 2; ++h)
      CUDA_CHECK(cudaMemcpyAsync(kv + kKv.offset(dst, l, h), kv + kKv.offset(src, l, h), sizeof(bf16) * tokens * kKV,
                                 cudaMemcpyDeviceToDevice, stream_.get()));
}

void H200Runner::capture_state(int slot, int snapshot) {
  CHECK(slot >= 0 && slot < kSlots && snapshot >= 0 && snapshot < kStateSnapshots);
  constexpr uint64_t R = kSnapshot.recurrent_bytes, C = kSnapshot.conv_bytes;
  uint8_t* dst = buf<uint8_t>(kBuf_state_snapshots) + snapshot * kSnapshot.slot_bytes();
  CUDA_CHECK(cudaMemcpyAsync(dst, buf<uint8_t>(kBuf_gdn_state) + slot * R, R, cudaMemcpyDeviceToDevice, stream_.get()));
  CUDA_CHECK(cudaMemcpyAsync(dst + kSnapshot.conv_offset(), buf<uint8_t>(kBuf_conv_state) + slot * C, C,
                             cudaMemcpyDeviceToDevice, stream_.get()));
}

void H200Runner::restore_state(int snapshot, int slot) {
  CHECK(slot >= 0 && slot < kSlots && snapshot >= 0 && snapshot < kStateSnapshots);
  constexpr uint64_t R = kSnapshot.recurrent_bytes, C = kSnapshot.conv_bytes;
  const uint8_t* src = buf<uint8_t>(kBuf_state_snapshots) + snapshot * kSnapshot.slot_bytes();
  CUDA_CHECK(cudaMemcpyAsync(buf<uint8_t>(kBuf_gdn_state) + slot * R, src, R, cudaMemcpyDeviceToDevice, stream_.get()));
  CUDA_CHECK(cudaMemcpyAsync(buf<uint8_t>(kBuf_conv_state) + slot * C, src + kSnapshot.conv_offset(), C,
                             cudaMemcpyDeviceToDevice, stream_.get()));
}

void H200Runner::copy_state(int from_slot, int to_slot) {
  CHECK(from_slot >= 0 && from_slot < kSlots && to_slot >= 0 && to_slot < kSlots);
  constexpr uint64_t R = kSnapshot.recurrent_bytes, C = kSnapshot.conv_bytes;
  uint8_t* g = buf<uint8_t>(kBuf_gdn_state);
  uint8_t* c = buf<uint8_t>(kBuf_conv_state);
  CUDA_CHECK(cudaMemcpyAsync(g + to_slot * R, g + from_slot * R, R, cudaMemcpyDeviceToDevice, stream_.get()));
  CUDA_CHECK(cudaMemcpyAsync(c + to_slot * C, c + from_slot * C, C, cudaMemcpyDeviceToDevice, stream_.get()));
}

}  // namespace rocket
