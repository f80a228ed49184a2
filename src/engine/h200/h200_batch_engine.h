// The H200 engine behind the scheduler's BatchEngine interface (serve/batch_engine.h), so the same
// scheduler drives either booster. Decode brings the step's logits to the host because the interface
// hands them out by pointer; the engine's own loops (bench, replay) read only the sampled tokens.
#pragma once

#include "engine/h200/h200_engine.h"
#include "serve/batch_engine.h"

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
  void decode(int n, const int32_t* ids, const int* slots, const int64_t* pos) override {
    e_.decode(n, ids, slots, pos, nullptr);
    e_.download_logits(n);
  }
  const float* logits(int row) const override { return e_.logits(row); }
  void reset_state(int slot) override { e_.reset_slot(slot); }
  void bind_pages(int slot, std::span<const int> pages) override { e_.bind_pages(slot, pages.data(), int(pages.size())); }
  void copy_page(int src, int dst, int tokens) override { e_.copy_page(src, dst, tokens); }
  void bind_pad_page(int page) override { e_.bind_pages(H200Engine::kPadSlot, &page, 1); }
  void capture_state(int slot, int snapshot) override { e_.capture_state(slot, snapshot); }
  void restore_state(int snapshot, int slot) override { e_.restore_state(snapshot, slot); }

 private:
  H200Engine& e_;
};

}  // namespace rocket
