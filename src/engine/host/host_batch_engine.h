// The host engine behind the scheduler's BatchEngine interface (scheduler/batch_engine.h).
#pragma once

#include <algorithm>
#include <vector>

#include "core/error.h"

#include "engine/host/host_engine.h"
#include "grammar/token_mask.h"
#include "kernels/host/sample.h"
#include "scheduler/batch_engine.h"

namespace rocket {

class HostBatchEngine final : public BatchEngine {
 public:
  explicit HostBatchEngine(HostEngine& e)
      : e_(e), contract_(e.plan()), counts_(size_t(e.plan().max_streams) * engine::kVocab),
        prompt_(size_t(e.plan().max_streams) * history_prompt_words(int(engine::kVocab))),
        bias_(size_t(e.plan().max_streams) * kMaxLogitBias) {}

  const Plan& plan() const override { return e_.plan(); }
  // The host engine computes each call its own way, but accepts exactly the calls the h200 engine
  // does, so CI's serving tests on the host refuse a step the GPU would.
  const StepContract& contract() const override { return contract_; }
  int vocab() const override { return int(engine::kVocab); }
  void prefill(int slot, const int32_t* ids, int n, int64_t pos0, const SamplingKnobs* knobs, bool want_logits,
               const PrefillCapture* capture) override {
    const PrefillSegment one{.slot = slot, .ids = ids, .n = n, .pos0 = pos0, .knobs = knobs, .want_logits = want_logits,
                             .capture = capture};
    contract_.check_prefill_batch({&one, 1}, 0);
    run_prefill(one);
  }
  // The host engine has no batched prefill: the decode rows as one decode call, as decode() would run
  // them, then one call per prompt segment, each segment's pick and last row kept.
  void prefill_batch(std::span<const PrefillSegment> segments, int d) override {
    contract_.check_prefill_batch(segments, d);
    std::vector<int32_t> picks(segments.size(), -1);
    batch_logits_.resize(segments.size() * size_t(engine::kVocab));
    const std::vector<const uint32_t*> masks = std::move(masks_);
    const auto mask_of = [&](size_t i) { return i < masks.size() ? masks[i] : nullptr; };
    if (d) {
      std::vector<int32_t> ids;
      std::vector<int> slots;
      std::vector<int64_t> pos;
      for (int i = 0; i < d; ++i) {
        ids.push_back(segments[size_t(i)].ids[0]);
        slots.push_back(segments[size_t(i)].slot);
        pos.push_back(segments[size_t(i)].pos0);
      }
      e_.decode(d, ids.data(), slots.data(), pos.data());
#pragma omp parallel for if (d > 1) schedule(dynamic)
      for (int i = 0; i < d; ++i)
        if (segments[size_t(i)].knobs) picks[size_t(i)] = pick(e_.logits(i), *segments[size_t(i)].knobs, mask_of(size_t(i)));
      for (int i = 0; i < d; ++i)
        std::copy_n(e_.logits(i), engine::kVocab, batch_logits_.begin() + int64_t(i) * engine::kVocab);
    }
    for (size_t i = size_t(d); i < segments.size(); ++i) {
      const PrefillSegment& g = segments[i];
      masks_.assign(1, mask_of(i));
      run_prefill(g);
      if (g.knobs) picks[i] = tokens_[0];
      if (!g.knobs && !g.want_logits) continue;
      const float* l = logits(0);
      std::copy(l, l + engine::kVocab, batch_logits_.begin() + int64_t(i) * engine::kVocab);
    }
    tokens_ = std::move(picks);
    batched_ = true;
  }
  // The host engine computes every row's logits anyway, so `want_logits` changes nothing here.
  void decode(int n, const int32_t* ids, const int* slots, const int64_t* pos, const SamplingKnobs* knobs,
              bool want_logits) override {
    contract_.check_decode(n, ids, slots, pos);
    const bool timed = sampling_.take();
    if (timed) e_.step_clock().start(e_.bucket_for(n));
    e_.decode(n, ids, slots, pos);
    logits_row0_ = 0;
    batched_ = false;
    tokens_.resize(size_t(n));
    // Rows are independent draws; dynamic, because a greedy row is an argmax and a sampled one a
    // full-vocabulary softmax.
#pragma omp parallel for if (n > 1) schedule(dynamic)
    for (int row = 0; row < n; ++row) tokens_[size_t(row)] = pick(e_.logits(row), knobs[row], row_mask(row));
    masks_.clear();
    if (!timed) return;
    e_.step_clock().lap(StepGroup::kSampling);
    observe_(e_.step_clock().stop());
  }
  bool masks_picks() const override { return true; }
  void mask_next_picks(std::span<const uint32_t* const> masks) override { masks_.assign(masks.begin(), masks.end()); }
  const int32_t* tokens() const override { return tokens_.data(); }
  const float* logits(int row) const override {
    return batched_ ? batch_logits_.data() + int64_t(row) * engine::kVocab : e_.logits(logits_row0_ + row);
  }
  int draft_tokens() const override { return e_.plan().draft_tokens; }
  void draft(int slot, int32_t token, int64_t pos, int k, int32_t* drafts) override {
    contract_.check_speculative("draft", slot, &token, 1, k, pos);
    e_.draft(slot, token, pos, k, drafts);
  }
  int verify(int slot, const int32_t* ids, int k, int64_t pos, const SamplingKnobs* knobs) override {
    contract_.check_speculative("verify", slot, ids, k + 1, k, pos);
    e_.verify(slot, ids, k, pos);
    // In order: each row's pick counts in the history the next row reads, as decode's steps would.
    tokens_.clear();
    int a = 0;
    for (;; ++a) {
      tokens_.push_back(pick(e_.logits(a), knobs[a], row_mask(a)));
      if (a == k || tokens_.back() != ids[a + 1]) break;
    }
    e_.accept(a);
    logits_row0_ = 0;
    batched_ = false;
    masks_.clear();
    return a;
  }
  void capture_verified(int row, int snapshot) override { e_.capture_verified(row, snapshot); }
  void reset_state(int slot) override { e_.reset_slot(slot); }
  void set_images(int slot, std::span<const int32_t> prompt, const vision::PromptImages& images,
                  int64_t computed) override {
    e_.set_images(slot, prompt, images, computed);
  }
  int64_t rope_delta(int slot) const override { return e_.rope_delta(slot); }
  void bind_pages(int slot, std::span<const int> pages) override { e_.bind_pages(slot, pages.data(), int(pages.size())); }
  void copy_page(int src, int dst, int tokens) override { e_.copy_page(src, dst, tokens); }
  void bind_pad_page(int page) override { e_.bind_pages(HostEngine::kPadSlot, &page, 1); }
  void capture_state(int slot, int snapshot) override { e_.capture_state(slot, snapshot); }
  void restore_state(int snapshot, int slot) override { e_.restore_state(snapshot, slot); }
  // A sampled decode step reads the host clock between its kernel groups (HostEngine::step_clock).
  void time_steps(int every, StepObserver observe) override {
    sampling_ = StepSampling(every);
    observe_ = std::move(observe);
  }
  void reset_history(int slot, std::span<const int32_t> prompt, std::span<const LogitBias> bias) override {
    CHECK(slot >= 0 && slot < e_.plan().max_streams && bias.size() <= size_t(kMaxLogitBias), "reset_history arguments");
    const int V = int(engine::kVocab), W = history_prompt_words(V);
    std::fill_n(counts_.begin() + int64_t(slot) * V, V, 0);
    uint32_t* bits = prompt_.data() + int64_t(slot) * W;
    std::fill_n(bits, W, 0u);
    for (const int32_t t : prompt) {
      CHECK(t >= 0 && t < V, "prompt token outside the vocabulary");
      bits[t / 32] |= 1u << (t % 32);
    }
    std::copy(bias.begin(), bias.end(), bias_.begin() + int64_t(slot) * kMaxLogitBias);
  }

 private:
  // One prefill call (within the contract). The last row's logits exist whenever a token is picked, so
  // `want_logits` changes nothing here; a capture splits the call in two around it.
  void run_prefill(const PrefillSegment& g) {
    const int32_t* ids = g.ids;
    int n = g.n;
    int64_t pos0 = g.pos0;
    if (g.capture) {
      const int c = g.capture->tokens;
      e_.prefill(g.slot, ids, c, pos0, c);
      e_.capture_state(g.slot, g.capture->snapshot);
      ids += c, n -= c, pos0 += c;
    }
    e_.prefill(g.slot, ids, n, pos0, g.knobs || g.want_logits ? n - 1 : n);
    logits_row0_ = n - 1;
    batched_ = false;
    const uint32_t* mask = row_mask(0);
    masks_.clear();
    if (!g.knobs) return;
    tokens_.resize(1);
    tokens_[0] = pick(e_.logits(n - 1), *g.knobs, mask);
  }

  const uint32_t* row_mask(int row) const { return size_t(row) < masks_.size() ? masks_[size_t(row)] : nullptr; }

  // host::sample's two phases with this thread's scratch: picking allocates nothing per token. A row
  // with a history reads it and counts its draw there (distinct rows name distinct slots, so parallel
  // rows never share one). A row with a grammar has its adjusted logits masked between the phases, in
  // the scratch the adjust phase writes anyway (the logits() callers see stay the model's).
  int32_t pick(const float* logits, const SamplingKnobs& knobs, const uint32_t* mask) {
    thread_local std::vector<float> scratch;
    thread_local std::vector<int32_t> scratch_idx;
    scratch.resize(size_t(engine::kVocab));
    scratch_idx.resize(size_t(engine::kVocab));
    const int V = int(engine::kVocab);
    int32_t* counts = nullptr;
    SamplingHistory history;
    if (knobs.history >= 0) {
      CHECK(knobs.history < e_.plan().max_streams, "a row's history names no stream slot");
      const int64_t slot = knobs.history;
      counts = counts_.data() + slot * V;
      history = {.counts = counts,
                 .prompt = prompt_.data() + slot * history_prompt_words(V),
                 .bias = bias_.data() + slot * kMaxLogitBias};
    }
    int32_t token;
    if (!mask) {
      token = host::sample(logits, V, knobs, scratch.data(), scratch_idx.data(), history);
    } else {
      if (knobs.adjusts()) host::adjust_logits(logits, V, knobs, history, scratch.data());
      else std::copy_n(logits, V, scratch.data());
      grammar::mask_logits(mask, scratch.data(), V);
      token = host::select_token(scratch.data(), V, knobs, scratch.data(), scratch_idx.data());
    }
    if (counts) ++counts[token];
    return token;
  }

  HostEngine& e_;
  StepContract contract_;
  std::vector<int32_t> tokens_;  // the last picks
  int logits_row0_ = 0;          // the engine's logits row that is row 0 of the last call
  bool batched_ = false;         // the last call was prefill_batch: logits(i) from batch_logits_
  std::vector<float> batch_logits_;  // [segments][vocab] of the last prefill_batch
  StepSampling sampling_;
  StepObserver observe_;
  // Every stream slot's sampling history (core/sampling_history.h).
  std::vector<int32_t> counts_;   // [max_streams][vocab]
  std::vector<uint32_t> prompt_;  // [max_streams][prompt words]
  std::vector<LogitBias> bias_;   // [max_streams][kMaxLogitBias]
  std::vector<const uint32_t*> masks_;  // mask_next_picks' for the next call
};

}  // namespace rocket
