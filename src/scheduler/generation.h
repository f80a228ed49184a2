// One request's output side, driven by the continuous-batching scheduler: everything between "the
// engine picked this request's next token" and "the HTTP thread receives text". A Generation gives the
// knobs every token of the request is drawn with (its own params and seed, the draw keyed by the
// token's position, so a seeded request reproduces whichever engine, batch or prompt-cache hit it
// meets), takes the engine's pick (or a test-only forced sequence's next token), detokenises it
// (StreamDecoder), holds back and cuts stop strings (StopMatcher), ends on eos / stop string /
// max_tokens, counts usage, and pushes TokenEvents to the request's RequestSink. The engine side only
// feeds picked tokens (and logits for logprobs), so a loop can drive one Generation per slot, one token
// at a time, in any interleaving.
//
// Thread safety: a Generation is driven by one thread (the engine loop); its RequestSink is the only
// part shared with the HTTP thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sampling_knobs.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "openai/openai_request.h"
#include "openai/openai_response.h"
#include "openai/stop_strings.h"
#include "scheduler/batch_engine.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace rocket {

// What the engine loop sends back for one choice of a request, in order: text pieces (whole UTF-8,
// stop strings already removed), then one event with done = true. The choices of a request with n > 1
// share its sink, their events interleaved.
struct TokenEvent {
  int choice = 0;  // choices[choice] of the response
  std::string text;
  // With `logprobs` requested: the tokens whose text this event completes, in order. A token is
  // released once all the text it decodes to has been emitted; at a stop string, the tokens that
  // begin before it (so text cut by a stop string still has its token), and none of the stop string.
  std::vector<TokenLogprob> logprobs;
  // Completion tokens stepped since the previous event (a token whose text is held back counts with
  // the event that releases it): how the server tells reasoning tokens from the rest.
  int64_t tokens = 0;
  bool done = false;
  FinishReason finish = FinishReason::kStop;  // kStop or kLength; tool calls are the server's to see
  std::string stop;  // done with kStop at a stop string: that string (empty at eos)
  Usage usage;  // done: prompt_tokens, completion_tokens, cached_tokens, of this choice
  std::string error;  // non-empty: the request failed in the engine
  int error_status = 500;  // the HTTP status of `error`: 400 where the request itself is at fault
};

// The per-request channel between the loop thread (push) and the HTTP thread (pop, cancel), shared by
// the request's choices. Thread-safe.
class RequestSink {
 public:
  explicit RequestSink(int choices = 1) : stop_requested_(size_t(choices)) {}
  void push(TokenEvent event);
  // Waits up to `timeout` for the next event.
  std::optional<TokenEvent> pop(std::chrono::milliseconds timeout);
  // The client went away: the loop stops the request at its next token (or skips it if queued).
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // The response is complete before the output ended (parallel_tool_calls=false has its call): the
  // loop ends the request at its next token as at a stop string, with the final event and usage.
  // NOTE: the HTTP thread parses behind the loop, which may have produced more by then; that text
  // still arrives (and counts in usage, being computed) and is the response's to drop.
  void request_stop(int choice = 0) { stop_requested_.at(size_t(choice)) = true; }
  bool stop_requested(int choice = 0) const { return stop_requested_.at(size_t(choice)); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  std::atomic<bool> cancelled_{false};
  std::vector<std::atomic<bool>> stop_requested_;  // per choice
};

// TEST-ONLY (`rocket serve --force-tokens FILE`): token sequences that replace sampling, so that the
// end-to-end tests can drive the protocol paths that need a particular model output (tool calls,
// reasoning) through the real server, which parses forced tokens exactly as sampled ones.
//
// FILE is a JSON object naming one sequence per key: {"tool_call": "<tool_call>\n{...}\n</tool_call>",
// "split": [9707, 11, 1879]}. A string is encoded with the engine's tokenizer (so tags become their
// added tokens, as the model would emit them); an array is taken as token ids verbatim (to split
// text where the tokenizer would not). A request selects a sequence by its `user` field, which never
// changes the output otherwise; a request whose `user` names none samples as usual.
class ForcedTokens {
 public:
  static ForcedTokens load(const std::string& path);

  // The sequence `user` names, encoded; nullopt when it names none.
  std::optional<std::vector<int32_t>> find(std::string_view user, const Tokenizer& tokenizer) const;
  size_t size() const { return sequences_.size(); }

 private:
  std::map<std::string, nlohmann::json, std::less<>> sequences_;
};

class Generation {
 public:
  // Choice `choice` of the request (its seed is the request's + choice). `max_tokens` >= 1 (the caller
  // has fitted it to the context). `forced` may be null.
  // REQUIRES: `tokenizer` and `forced` outlive the Generation; choice < request.n.
  Generation(uint64_t id, const CompletionRequest& request, std::vector<int32_t> prompt, int64_t max_tokens,
             const Tokenizer& tokenizer, const std::vector<int32_t>& eos, std::shared_ptr<RequestSink> sink,
             const ForcedTokens* forced, int choice = 0);
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  uint64_t id() const { return id_; }
  const std::vector<int32_t>& prompt() const { return prompt_; }

  // Takes the token the engine picked with knobs(pos) for the next position `pos` (or the forced
  // sequence's next instead), and pushes the text it completes. `logits` (`vocab` floats, the row
  // the engine picked from) may be null unless needs_logits(). Returns the token to feed back to the
  // engine at `pos`, or nullopt when the request is finished (eos, stop string, max_tokens, forced
  // sequence ended, stop requested, cancelled); then the final event has been pushed, none if
  // cancelled. REQUIRES: not finished.
  std::optional<int32_t> step(int32_t picked, const float* logits, int vocab);
  // The knobs an engine draws this request's token at position `pos` with, reading the sampling
  // history of stream slot `history` when the request adjusts its logits (else -1 is fine).
  SamplingKnobs knobs(int64_t pos, int history = -1) const;
  // The request's rows adjust their logits (penalties, logit_bias): the engine needs its history.
  bool adjusts() const;
  const std::vector<LogitBias>& logit_bias() const { return logit_bias_; }
  int choice() const { return choice_; }
  // Logprobs were requested: stepping needs the logits as well as the token.
  bool needs_logits() const { return top_logprobs_ >= 0; }
  // Whether a drafting engine may speculate for it (docs/speculative.md): the request allows it
  // (`speculative`, default on) and every pick is the token fed back: no forced tokens or reasoning
  // budget. Logprobs come from each verified row's logits, a grammar's or min_tokens' masks apply to
  // each verified row (mask_drafts).
  bool speculates() const { return speculative_ && !forced_ && !reasoning_close_; }
  // The masks of a verify step's rows that feed `drafts` after the next token: row j's is what
  // token_mask() would give once drafts[0..j) were picked, row 0's is `row0` (token_mask()'s, or
  // nullptr). The grammar's matcher steps through the drafts and comes back. Returns how many drafts
  // the step may verify: it stops before a draft its row's mask refuses, before eos (which ends a
  // constrained output) and before a row whose mask cannot be made (the plain step that reaches it
  // says why). draft_mask(j), j <= that count, stays valid until the next call. REQUIRES: not finished.
  int mask_drafts(std::span<const int32_t> drafts, const uint32_t* row0);
  const uint32_t* draft_mask(int row) const { return draft_masks_[size_t(row)].data(); }

  // The client is gone: the driver may drop the stream without stepping it again.
  bool cancelled() const { return sink_->cancelled(); }
  bool finished() const { return finished_; }
  // The final event (done, or an error) went to the client: the request completed rather than being
  // abandoned by a client that left.
  bool answered() const { return answered_; }
  // Why the output ended, once it has (nullopt while running, when cancelled or failed).
  std::optional<FinishReason> finish_reason() const { return finish_reason_; }
  int64_t completion_tokens() const { return usage_.completion_tokens; }

  // Structured output: every token from now on (or, with `after` set, from the token after `after`,
  // the reasoning's closing </think>: reasoning is free text) follows `grammar`, which first takes
  // `primer` (text the prompt ends with that is already part of the answer: a forced tool call's
  // opening). Call before the first step. REQUIRES: the grammar accepts `primer`.
  void constrain(std::shared_ptr<const grammar::CompiledGrammar> grammar, std::optional<int32_t> after,
                 std::string_view primer = {});
  // A reasoning budget (thinking.budget_tokens): the prompt opened the reasoning, and once `budget`
  // tokens of it are out the next pick is replaced by `close` (</think>), which the engine is fed in
  // its place, so the answer follows. Call before the first step.
  void budget_reasoning(int32_t close, int64_t budget);
  // min_tokens: eos is masked out of the request's first min_tokens picks, in an engine vocabulary of
  // `vocab` tokens (the masks' width). Call before the first step when the request has min_tokens.
  void hold_eos(int vocab);
  // The allowed-token bitmask for the token at the next position (grammar::Matcher::fill_mask's
  // layout, valid until the next call), or nullptr when unconstrained. When no token can continue the
  // grammar the request fails with a message saying so (finished() afterwards) and this returns
  // nullptr. REQUIRES: not finished.
  const uint32_t* token_mask();

  // Prompt tokens the prefix cache served (usage.prompt_tokens_details.cached_tokens); 0 by default.
  void set_cached_tokens(int64_t n) { usage_.cached_tokens = n; }

  // The engine failed on this request: pushes an error event and finishes. REQUIRES: not finished.
  void fail(std::string_view message, int status = 500);

 private:
  // A token's logprobs, and where its text lies in the decoder's output.
  struct Scored {
    TokenLogprob logprob;
    size_t begin, end;  // byte offsets in everything StreamDecoder has returned
  };

  std::optional<int32_t> finish(FinishReason reason);
  // The mask of a pick after `completion` completion tokens, the grammar applying (`grammar_on`) or
  // not yet (before </think>): the grammar's, made into `out` (mask_'s width), with eos held back
  // before min_tokens unless the grammar allows nothing else; else min_tokens' eos hold; else none
  // (empty). `allowed`: Matcher::fill_mask's count (0: nothing continues; kTooComplex past `budget`
  // parser work), 1 where no grammar applies.
  std::span<const uint32_t> pick_mask(std::span<uint32_t> out, int64_t completion, bool grammar_on, uint64_t budget,
                                      int& allowed);
  // The width in words of a mask token_mask() returned.
  size_t mask_width(const uint32_t* mask) const;
  // Pushes `text` (may be empty) with the logprobs of the tokens it completes; `stopped`: the output
  // ends with it, so tokens begun before its end are released too and the rest dropped.
  void emit(std::string text, bool stopped);

  uint64_t id_;
  std::vector<int32_t> prompt_;
  int64_t max_tokens_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> eos_;
  std::shared_ptr<RequestSink> sink_;
  std::optional<std::vector<int32_t>> forced_;
  size_t forced_next_ = 0;
  SamplingKnobs knobs_;  // counter 0, history -1: knobs(pos, history) sets them
  std::vector<LogitBias> logit_bias_;
  int choice_ = 0;
  StreamDecoder decoder_;
  StopMatcher stops_;
  int top_logprobs_ = -1;  // alternatives per token; -1 = logprobs not requested
  std::optional<grammar::Matcher> matcher_;  // a structured output
  bool speculative_ = true;  // the request's `speculative`
  std::optional<int32_t> grammar_after_;    // the matcher starts after this token (</think>)
  std::optional<int32_t> reasoning_close_;  // budget_reasoning(): </think>, while the reasoning is open
  int64_t reasoning_left_ = 0;              // reasoning tokens the budget still allows
  std::vector<uint32_t> mask_;
  bool ignore_eos_ = false;
  int64_t min_tokens_ = 0;
  std::vector<uint32_t> eos_held_;  // hold_eos(): every token but eos
  std::vector<std::span<const uint32_t>> draft_masks_;  // mask_drafts(): row j's mask (empty: none)
  std::vector<uint32_t> draft_words_;                   // the grammar's masks of rows 1..k
  std::deque<Scored> scored_;  // logprobs not yet released
  size_t decoded_ = 0;         // bytes StreamDecoder has returned
  size_t emitted_ = 0;         // bytes pushed to the sink
  int64_t tokens_pushed_ = 0;  // completion tokens counted by the events pushed so far
  Usage usage_;
  bool finished_ = false;
  bool answered_ = false;
  std::optional<FinishReason> finish_reason_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace rocket
