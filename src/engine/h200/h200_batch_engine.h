// The H200 engine behind the scheduler's BatchEngine interface (scheduler/batch_engine.h), so the same
// scheduler drives either booster. Decode samples on the device and brings back only the rows' tokens;
// the logits (19 MB a step at 32 rows) cross to the host only when the step wants them (logprobs).
#pragma once

#include <vector>

#include "engine/h200/h200_engine.h"
#include "scheduler/batch_engine.h"

namespace rocket {

class H200BatchEngine final : public BatchEngine {
 public:
  explicit H200BatchEngine(H200Engine& e) : e_(e) {}

  const Plan& plan() const override { return e_.plan(); }
  int vocab() const override { return int(engine::kVocab); }
  const float* prefill(int slot, const int32_t* ids, int n, int64_t pos0, bool want_logits) override {
    e_.prefill(slot, ids, n, pos0, want_logits ? n - 1 : n);
    return want_logits ? e_.logits(n - 1) : nullptr;
  }
  void decode(int n, const int32_t* ids, const int* slots, const int64_t* pos, const RowSampling* sampling,
              bool want_logits) override {
    knobs_.resize(size_t(n));
    for (int i = 0; i < n; ++i) {
      const RowSampling& r = sampling[i];
      knobs_[size_t(i)] = cuda::SampleRow{
          .temperature = r.temperature, .top_p = r.top_p, .top_k = r.top_k, .seed = r.seed, .counter = r.counter};
    }
    e_.decode(n, ids, slots, pos, knobs_.data());
    if (want_logits) e_.download_logits(n);
    tokens_ = e_.tokens();
  }
  const int32_t* tokens() const override { return tokens_; }
  const float* logits(int row) const override { return e_.logits(row); }
  void reset_state(int slot) override { e_.reset_slot(slot); }
  void bind_pages(int slot, std::span<const int> pages) override { e_.bind_pages(slot, pages.data(), int(pages.size())); }
  void copy_page(int src, int dst, int tokens) override { e_.copy_page(src, dst, tokens); }
  void bind_pad_page(int page) override { e_.bind_pages(H200Engine::kPadSlot, &page, 1); }
  void capture_state(int slot, int snapshot) override { e_.capture_state(slot, snapshot); }
  void restore_state(int snapshot, int slot) override { e_.restore_state(snapshot, slot); }

 private:
  H200Engine& e_;
  std::vector<cuda::SampleRow> knobs_;
  const int32_t* tokens_ = nullptr;  // the engine's host copy of the last decode's picks
};

}  // namespace rocket
