// BatchEngine: what the scheduler needs from an engine, implemented by each engine binary (the host
// engine in src/engine/host/, the h200 engine later). Every call comes from the scheduler's loop
// thread; nothing here is thread-safe.
//
// Streams live in slots [0, max_streams()); the engine's own padding slot is its business. KV is
// paged: the scheduler owns the cache pages (cache/radix_cache.h) and binds each slot's page table
// before the slot computes; recurrent state moves between slots and the plan's snapshot slots only
// through capture/restore, so one cache entry restores a sequence atomically.
#pragma once

#include <cstdint>
#include <span>

#include "core/error.h"
#include "core/sampling_history.h"
#include "core/sampling_knobs.h"
#include "plan/plan.h"
#include "scheduler/step_contract.h"
#include "telemetry/step_split.h"
#include "vision/prompt_images.h"

namespace rocket {

// A snapshot taken inside a prefill call: the stream's conv + recurrent state after the first
// `tokens` of its n rows (0 < tokens < n), into state snapshot `snapshot`. The prefix cache wants the
// state at the last page boundary a prompt reaches, which a long call passes midway.
struct PrefillCapture {
  int tokens = 0;
  int snapshot = -1;
};

// One stream's rows of a batched prefill call (BatchEngine::prefill_batch): as prefill's arguments.
struct PrefillSegment {
  int slot = 0;
  const int32_t* ids = nullptr;
  int n = 0;
  int64_t pos0 = 0;
  const SamplingKnobs* knobs = nullptr;  // picks the token after the segment's last row
  bool want_logits = false;              // the last row's logits come back as well
  const PrefillCapture* capture = nullptr;
};

class BatchEngine {
 public:
  virtual ~BatchEngine() = default;

  // The bounds of every call (scheduler/step_contract.h), the plan's: the scheduler builds its steps
  // from them and every engine refuses a call outside them with StepRefused.
  virtual const StepContract& contract() const = 0;

  virtual const Plan& plan() const = 0;
  virtual int vocab() const = 0;

  // n <= plan().prefill_chunk consecutive tokens of the stream in `slot` at positions pos0... With
  // `knobs` (the chunk that ends a prompt) the engine picks the token after the last row with them,
  // exactly as decode picks its rows' (read it with tokens()[0]); nullptr picks nothing.
  // `want_logits`: the last row's logits are needed as well (logits(0)). `capture` (nullptr: none)
  // snapshots the state inside the call. Throws StepRefused for a call outside the contract (as the
  // one-segment prefill_batch it is).
  virtual void prefill(int slot, const int32_t* ids, int n, int64_t pos0, const SamplingKnobs* knobs,
                       bool want_logits, const PrefillCapture* capture = nullptr) = 0;
  // Several streams' prefill rows in one call, so the weights are read once for all of them; the
  // first `decode_rows` segments are decoding streams' rows (one row each, knobs picking their next
  // token exactly as decode's): a mixed step, decode rows and prompt pieces as one call. Afterwards
  // tokens()[i] and logits(i) are segment i's, as prefill's tokens()[0] and logits(0).
  // Throws StepRefused, before any work, for a call outside the plan's StepContract.
  virtual void prefill_batch(std::span<const PrefillSegment> segments, int decode_rows) = 0;
  // One token for each of n <= plan().max_streams streams, run as the smallest bucket holding n; each
  // row picks its next token inside the engine with knobs[row] (read them with tokens()), so the loop
  // thread samples nothing and an engine on a device brings only n tokens back. `want_logits`: the
  // rows' logits are needed as well (logprobs), at the cost of bringing them to the host. Throws
  // StepRefused for a call outside the contract.
  virtual void decode(int n, const int32_t* ids, const int* slots, const int64_t* pos, const SamplingKnobs* knobs,
                      bool want_logits) = 0;
  // The token each row of the last decode picked, row order, or the last prefill's pick (row 0) when
  // it had knobs, or each segment's of the last prefill_batch; valid until the next call.
  virtual const int32_t* tokens() const = 0;
  // Logits of row `row` of the last decode, or of the last prefill's last row (row 0), which must have
  // wanted them (valid until the next prefill or decode).
  virtual const float* logits(int row) const = 0;

  // Structured outputs: whether this engine masks its picks with mask_next_picks (the server refuses
  // a response_format that needs it otherwise).
  virtual bool masks_picks() const { return false; }
  // The allowed-token bitmask (grammar::Matcher::fill_mask's layout: bit t of word t / 32) of each
  // row the next prefill, prefill_batch, decode or verify call picks, in that call's row (segment) order; a
  // null entry, or rows past the span, are unconstrained. Applies to that one call only; the masks
  // must stay valid until it returns. REQUIRES: masks_picks().
  virtual void mask_next_picks(std::span<const uint32_t* const> masks) {
    CHECK(false, "this engine does not mask its picks");
  }

  // Speculative decoding (docs/speculative.md). The tokens one draft proposes (the plan's
  // draft_tokens); 0: this engine does not draft and never gets the three calls below.
  virtual int draft_tokens() const { return 0; }
  // k tokens the engine proposes to follow `token`, the stream's next token (picked, not yet
  // computed) at position pos. Throws StepRefused outside the contract (StepContract::check_speculative).
  virtual void draft(int slot, int32_t token, int64_t pos, int k, int32_t* drafts) {
    CHECK(false, "this engine does not draft");
  }
  // One stream's k + 1 rows ids = [token, drafts...] at positions pos.. in one call. Row j picks with
  // knobs[j] (and the slot's history) exactly as a decode row at its position would, in order, until
  // a pick differs from the draft after it or row k is picked: returns how many drafts that accepted
  // (a), tokens()[0..a] the picks and logits(0..a) the rows' logits they were picked from (a
  // request's logprobs). The stream's state and KV continue from row a, whose pick is its
  // next token. mask_next_picks' mask j masks row j's pick (a grammar's, min_tokens'). Throws
  // StepRefused outside the contract.
  virtual int verify(int slot, const int32_t* ids, int k, int64_t pos, const SamplingKnobs* knobs) {
    CHECK(false, "this engine does not draft");
    return 0;
  }
  // After verify(): the stream's state after its row `row` (0 <= row <= a), the state at boundary
  // pos + row + 1, into snapshot `snapshot` (the prefix cache's boundary inside a step).
  virtual void capture_verified(int row, int snapshot) { CHECK(false, "this engine does not draft"); }

  // Image input (docs/vision-tower.md, "In the host engine", "In the H200 engine"): the sequence in
  // `slot` runs the prompt `prompt`, whose image_pad runs are `images` in order. Call after
  // reset_state or restore_state (which forget a slot's images) and before the slot's prefill. The
  // engine encodes the images; the prompt's image tokens take their embeddings, the prompt the
  // multimodal rotary positions, and every token after it the rope delta (KV positions stay token
  // indices). Empty images: a text sequence.
  // `computed`: the prompt's tokens the slot's state holds already (restored from the prefix cache, 0
  // after reset_state), which it never runs again; an image wholly before it need not be encoded,
  // and a resume inside an image reads that image's rows from `computed` on.
  // `images.digests` (where given) key the images' encoded rows in an engine that keeps them (the
  // H200's encoder cache). Error where this engine runs no vision tower (its plan carries none; this
  // default: an engine without image input) or the images do not match the prompt's image tokens.
  virtual void set_images(int slot, std::span<const int32_t> prompt, const vision::PromptImages& images,
                          int64_t computed) {
    // NOTE: Error composed by hand: this header is compiled by nvcc too, which has no fail().
    if (!images.empty())
      throw Error("image input: this " + plan().booster + " engine takes no images");
  }
  // The rope delta of the sequence in `slot` (docs/vision-tower.md, "The text side"): every token after
  // its prompt rotates at index + delta. 0 for a text sequence, and on an engine that runs no images.
  virtual int64_t rope_delta(int slot) const { return 0; }
  // A fresh sequence in `slot`: zero conv and recurrent state.
  virtual void reset_state(int slot) = 0;
  // The slot's KV page table from now on: logical page j is cache page pages[j].
  virtual void bind_pages(int slot, std::span<const int> pages) = 0;
  // Copies the first `tokens` rows of cache page src into dst (every layer, K and V).
  virtual void copy_page(int src, int dst, int tokens) = 0;
  // The pages padding rows write to: one cache page the scheduler reserves for them.
  virtual void bind_pad_page(int page) = 0;
  virtual void capture_state(int slot, int snapshot) = 0;
  virtual void restore_state(int snapshot, int slot) = 0;

  // Step telemetry (telemetry/step_split.h): from now on one decode step in `every` (0: none) is
  // measured by kernel group on the running engine and handed to `observe`, on the loop thread.
  virtual void time_steps(int every, StepObserver observe) = 0;

  // The sampling history of `slot` (core/sampling_history.h) for a new request whose rows adjust their
  // logits: no output token counted, `prompt`'s tokens marked, `bias` its logit bias (at most
  // kMaxLogitBias distinct tokens, each < vocab()). Rows whose knobs name the slot read it from now on.
  virtual void reset_history(int slot, std::span<const int32_t> prompt, std::span<const LogitBias> bias) = 0;
};

}  // namespace rocket
