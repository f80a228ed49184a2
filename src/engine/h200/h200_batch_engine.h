// The H200 engine behind the scheduler's BatchEngine interface (scheduler/batch_engine.h), so the same
// scheduler drives either booster. Decode and a prompt's last prefill chunk sample on the device and
// bring back only the picked tokens; the logits (19 MB a step at 32 rows) cross to the host only when
// the step wants them (logprobs).
#pragma once

#include "engine/h200/h200_engine.h"
#include "scheduler/batch_engine.h"

namespace rocket {

class H200BatchEngine final : public BatchEngine {
 public:
  explicit H200BatchEngine(H200Engine& e) : e_(e), contract_(e.contract()) {}

  const Plan& plan() const override { return e_.plan(); }
  const StepContract& contract() const override { return contract_; }
  int vocab() const override { return int(engine::kVocab); }
  void prefill(int slot, const int32_t* ids, int n, int64_t pos0, const SamplingKnobs* knobs, bool want_logits,
               const PrefillCapture* capture) override {
    const PrefillSegment one{.slot = slot, .ids = ids, .n = n, .pos0 = pos0, .knobs = knobs, .want_logits = want_logits,
                             .capture = capture};
    contract_.check_prefill_batch({&one, 1}, 0);
    e_.prefill(slot, ids, n, pos0, want_logits ? n - 1 : n, knobs, capture);
    if (knobs) tokens_ = e_.tokens();
    logits_row0_ = n - 1;
  }
  // A mixed call's decode rows run as a decode bucket inside the token path's piece (H200Engine::
  // prefill_batch); the bucket's padding and the prompts share the piece's rows and segment entries,
  // as the contract counts them.
  // (H200Engine::prefill_batch checks the contract and runs its layout.)
  void prefill_batch(std::span<const PrefillSegment> segments, int decode_rows) override {
    if (segments.size() == 1 && decode_rows == 0) {
      const PrefillSegment& g = segments[0];
      return prefill(g.slot, g.ids, g.n, g.pos0, g.knobs, g.want_logits, g.capture);
    }
    e_.prefill_batch(segments, decode_rows);
    tokens_ = e_.tokens();
    logits_row0_ = 0;
  }
  // (H200Engine::decode checks the contract.)
  void decode(int n, const int32_t* ids, const int* slots, const int64_t* pos, const SamplingKnobs* knobs,
              bool want_logits) override {
    const bool timed = sampling_.take();
    e_.decode(n, ids, slots, pos, knobs, timed);
    if (want_logits) e_.download_logits(n);
    tokens_ = e_.tokens();
    logits_row0_ = 0;
    if (timed) observe_(e_.step_split());
  }
  const int32_t* tokens() const override { return tokens_; }
  // The sampler reads the masks from mapped pinned memory in the same kernel (H200Engine::mask_next_picks).
  bool masks_picks() const override { return true; }
  void mask_next_picks(std::span<const uint32_t* const> masks) override { e_.mask_next_picks(masks); }
  const float* logits(int row) const override { return e_.logits(logits_row0_ + row); }
  void set_images(int slot, std::span<const int32_t> prompt, const vision::PromptImages& images, int64_t computed) override {
    e_.set_images(slot, prompt, images, computed);
  }
  int64_t rope_delta(int slot) const override { return e_.rope_delta(slot); }
  void reset_state(int slot) override { e_.reset_slot(slot); }
  void bind_pages(int slot, std::span<const int> pages) override { e_.bind_pages(slot, pages.data(), int(pages.size())); }
  void copy_page(int src, int dst, int tokens) override { e_.copy_page(src, dst, tokens); }
  void bind_pad_page(int page) override { e_.bind_pages(H200Engine::kPadSlot, &page, 1); }
  void capture_state(int slot, int snapshot) override { e_.capture_state(slot, snapshot); }
  void restore_state(int snapshot, int slot) override { e_.restore_state(snapshot, slot); }
  // A sampled decode step runs its bucket's timing graph (H200Engine::decode's `timed`).
  void time_steps(int every, StepObserver observe) override {
    sampling_ = StepSampling(every);
    observe_ = std::move(observe);
  }
  void reset_history(int slot, std::span<const int32_t> prompt, std::span<const LogitBias> bias) override {
    e_.reset_history(slot, prompt, bias);
  }

 private:
  H200Engine& e_;
  const StepContract& contract_;
  const int32_t* tokens_ = nullptr;  // the engine's pinned copy of the last picks
  int logits_row0_ = 0;              // the engine's logits row that is row 0 of the last call
  StepSampling sampling_;
  StepObserver observe_;
};

}  // namespace rocket
