// The host engine behind the scheduler's BatchEngine interface (scheduler/batch_engine.h).
#pragma once

#include <vector>

#include "engine/host/host_engine.h"
#include "kernels/host/sample.h"
#include "scheduler/batch_engine.h"

namespace rocket {

class HostBatchEngine final : public BatchEngine {
 public:
  explicit HostBatchEngine(HostEngine& e) : e_(e) {}

  const Plan& plan() const override { return e_.plan(); }
  int vocab() const override { return int(engine::kVocab); }
  const float* prefill(int slot, const int32_t* ids, int n, int64_t pos0, bool want_logits) override {
    e_.prefill(slot, ids, n, pos0, want_logits ? n - 1 : n);
    return want_logits ? e_.logits(n - 1) : nullptr;
  }
  // The host engine computes every row's logits anyway, so `want_logits` changes nothing here.
  void decode(int n, const int32_t* ids, const int* slots, const int64_t* pos, const RowSampling* sampling,
              bool want_logits) override {
    e_.decode(n, ids, slots, pos);
    tokens_.resize(size_t(n));
    // Rows are independent draws; dynamic, because a greedy row is an argmax and a sampled one a
    // full-vocabulary softmax.
#pragma omp parallel for if (n > 1) schedule(dynamic)
    for (int row = 0; row < n; ++row) {
      thread_local std::vector<float> scratch;
      thread_local std::vector<int32_t> scratch_idx;
      scratch.resize(size_t(engine::kVocab));
      scratch_idx.resize(size_t(engine::kVocab));
      const RowSampling& r = sampling[row];
      tokens_[size_t(row)] = host::sample(e_.logits(row), int(engine::kVocab), {r.temperature, r.top_p, r.top_k, r.seed},
                                          r.counter, scratch.data(), scratch_idx.data());
    }
  }
  const int32_t* tokens() const override { return tokens_.data(); }
  const float* logits(int row) const override { return e_.logits(row); }
  void reset_state(int slot) override { e_.reset_slot(slot); }
  void bind_pages(int slot, std::span<const int> pages) override { e_.bind_pages(slot, pages.data(), int(pages.size())); }
  void copy_page(int src, int dst, int tokens) override { e_.copy_page(src, dst, tokens); }
  void bind_pad_page(int page) override { e_.bind_pages(HostEngine::kPadSlot, &page, 1); }
  void capture_state(int slot, int snapshot) override { e_.capture_state(slot, snapshot); }
  void restore_state(int snapshot, int slot) override { e_.restore_state(snapshot, slot); }

 private:
  HostEngine& e_;
  std::vector<int32_t> tokens_;  // the last decode's picks
};

}  // namespace rocket
