// Scheduler: continuous batching of many requests into the engine's compiled buckets, with the
// token-exact prefix cache (src/cache). One loop thread owns the engine, the cache and every stream;
// HTTP threads only submit() and read their RequestSink.
//
// Each loop iteration is one engine step:
//  1. Admission, first come first served: while a slot is free, the oldest waiting request resumes
//     from the deepest cached boundary of its prompt (KV pages shared, recurrent state restored from
//     the entry's snapshot) and reserves pages for the rest. A request that cannot get pages waits at
//     the head of the queue, so nobody behind it overtakes it (no starvation); it is refused only when
//     nothing is running that could ever free pages.
//  2. Decode: every stream that has its next token runs, as the smallest compiled bucket holding them;
//     the engine picks each row's next token with the request's sampling knobs (on the device for the
//     H200), and hands out logits only when a request asked for logprobs.
//  3. Prefill: streams still reading their prompt run chunks of the plan's prefill size, oldest first,
//     within a per-step token budget so the decoding streams keep a steady inter-token latency. A step
//     with decode rows and prompts waiting is one call where the plan's StepContract leaves room
//     (mixed_room): the decode rows, then the budget's prompt pieces, every weight read once for both
//     (chunked prefill); otherwise the prefill calls follow the decode call. Every call is built within
//     the StepContract (scheduler/step_contract.h), which both engines enforce. Where a chunk ends on a
//     page boundary the state is captured into a snapshot slot, and after the prompt the prefix is
//     published so concurrent requests sharing it hit at once. The chunk that ends a prompt picks the
//     stream's first token inside the engine, with the knobs decode uses.
// A stream that finishes (eos, stop, length) or whose client left detaches: the pages up to its last
// captured boundary stay cached for the next turn; the rest returns to the pool.
// A request with n > 1 choices forks: choice 0 runs as any request; once its prompt is computed and
// published, choices 1..n-1 go to the head of the queue and are admitted through the prefix cache
// (its pages shared, the recurrent state restored from the snapshot at the prompt's last page
// boundary), so each recomputes only the prompt's tail past that boundary and draws its own tokens
// (seed + choice) into the request's one sink.
//
// Faults. A call the engine refuses (StepRefused: outside the contract, so a scheduler bug, refused
// before any work) fails the streams in it and counts in refused_steps; the loop goes on. Any other
// exception from the engine's batched work (prefill, prefill_batch, decode, a capture in a
// step) leaves the device in an unknown state: the loop fails every running and queued request with
// the error, ends, and reports kFailed (state()) and on_failure, so the process can exit and be
// restarted. An exception that belongs to one request (admitting it: restore_state, reset_state, a
// page copy or binding; stepping its Generation) fails that request alone, its slot retired with its
// pages and snapshot released, and the others go on.
//
// Prefix reports (report_prefix(), for the replicated front). The cache has no lock of its own: the
// loop thread owns it and mutates it all through a step (admission, captures, publishes, retires,
// evictions). So a report is a query the loop answers between two steps, under mu_, with const
// lookups only: no lock on the cache spread through the step, no LRU touch. It waits at most one
// step, which is small next to the request it routes (a prefill at least); the prompt is rendered
// and tokenised on the HTTP thread, as submit() does.
//
// Images (docs/images.md, "In the scheduler"). Where the plan carries a vision tower, a chat
// request's prompt is built with its images (PromptBuilder::build_with_images): the request waits
// with their patches and grids (the client's bytes are dropped once preprocessed), and every
// admission of it (choice 0 and each fork) hands them to the engine (set_images) after the slot's
// state is reset or restored, before its prefill. Every image token is the same id whatever the
// image, so the prefix cache is not handed the ids but the prompt's key (cache/prompt_key.h): the ids
// with each image's tokens replaced by values derived from its content's digest, never a vocabulary
// id. Every question to the cache (resume, cached_prefix, extend and so capture and publish, the
// prefix reports, the forks of n > 1) asks with the key, so a prompt that resends an image resumes
// past it and a different image at the same place shares nothing from its first image token on. The
// cache holds no state at a boundary within an image's first PromptKey::kDigestTokens tokens (too few
// of its key to stand for it): no capture there (PromptKey::holds), so no resume either, and the
// branch points and prefix reports step back from one. set_images gets how far the slot's state is
// already computed, so the engine encodes only the images it still reads. Without a tower a request
// with images is a 400 naming why.
//
// Drain (drain()): submit() answers 503 from then on; the requests already accepted run to their end
// or, past the deadline, are answered with an error.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/prompt_key.h"
#include "cache/radix_cache.h"
#include "cache/stream_pages.h"
#include "grammar/grammar_cache.h"
#include "openai/prompt_builder.h"
#include "scheduler/batch_engine.h"
#include "scheduler/engine_loop.h"
#include "scheduler/generation.h"
#include "telemetry/telemetry.h"

namespace rocket {

struct SchedulerOptions {
  size_t queue_capacity = 64;  // requests waiting for a slot; beyond it submit() answers 503
  // Prompt tokens prefilled per step while streams are decoding (0: 128, or one prefill call where a
  // call is longer, as the h200 token path's 2048; a mixed step takes at most StepContract::mixed_room's
  // rows of it). It trades
  // the decoding streams' inter-token latency against the waiting prompts' time to first token; with
  // nothing decoding, prefill runs four times the budget per step, and at least one full call.
  int prefill_budget = 0;
  // Where requests' latencies, token counts and spans go (telemetry/telemetry.h); null: nowhere.
  // REQUIRES: outlives the scheduler.
  Telemetry* telemetry = nullptr;
  // The image decoder's bounds for requests with images (launch sets max_bytes from --max-image-bytes).
  ImageLimits image_limits;
  // Not a flag: called once, on the loop thread, after the engine failed and every request has been
  // answered (launch wakes up to exit non-zero).
  std::function<void()> on_failure;
};

// Counters for /stats (and the load gauges of /metrics) and the workload driver; a snapshot taken on the loop thread.
struct SchedulerStats {
  int64_t requests = 0, finished = 0, cancelled = 0, refused = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
  int64_t steps = 0, decode_rows = 0, prefill_tokens = 0;
  int64_t mixed_steps = 0;  // steps whose decode rows and prompt pieces ran as one engine call
  // Engine calls refused by the StepContract (scheduler/step_contract.h): a scheduler bug, its streams
  // failed. Always 0; the serving tests assert it.
  int64_t refused_steps = 0;
  // Speculative decoding (a drafting engine, docs/speculative.md): verify steps, the tokens drafted
  // and the drafts accepted (the acceptance is accepted / drafted; a verify step emits accepted /
  // verify_steps + 1 tokens on average).
  int64_t verify_steps = 0, drafted_tokens = 0, accepted_tokens = 0;
  int active = 0, waiting = 0;
  int pages = 0, pages_free = 0, pages_cached = 0;
  int page_tokens = 0;  // the cache resumes a prompt at multiples of this
  int snapshots = 0, snapshots_free = 0, snapshots_cached = 0;
  nlohmann::ordered_json to_json() const;
};

class Scheduler : public EngineLoop {
 public:
  // Starts the loop thread. `engine` (and `forced`, test-only, may be null) must outlive the scheduler.
  Scheduler(PromptBuilder prompts, BatchEngine& engine, ModelInfo model, SchedulerOptions options = {},
            const ForcedTokens* forced = nullptr);
  ~Scheduler() override;

  const ModelInfo& model() const override { return model_; }
  Submitted submit(const CompletionRequest& request, std::shared_ptr<RequestSink> sink) override;
  nlohmann::ordered_json stats() const override;
  LoopState state() const override;
  PrefixReport report_prefix(const CompletionRequest& request) override;

  // Stops accepting (submit() answers 503) and blocks until every accepted request has been answered;
  // at `deadline` the ones still running or queued are answered with an error (the server is shutting
  // down). Returns how many were cut off that way. Any thread but the loop's.
  int drain(std::chrono::steady_clock::time_point deadline);

 private:
  struct Waiting {
    uint64_t id;
    Prompt prompt;
    CompletionRequest request;
    std::shared_ptr<RequestSink> sink;
    RequestTrace trace;
    int choice = 0;
    std::shared_ptr<const grammar::CompiledGrammar> grammar;  // response_format or tool calls; null: text
    // The forced tool call's opening, which the prompt ends with (forced_opening): the grammar takes
    // it before the first token, and starts at once (the opening closed any reasoning).
    std::string grammar_primer;
    vision::PromptImages images;  // the prompt's images for the engine (set_images); empty: text
    // What the prefix cache is asked with instead of the ids: their images keyed by content
    // (cache/prompt_key.h); a text prompt's ids as they are.
    PromptKey key;
  };
  struct Stream {
    uint64_t id = 0;
    int slot = -1;
    std::vector<int32_t> prompt;
    int computed = 0;   // prompt tokens whose KV and state are computed
    // A boundary this prompt shares with cached sequences but could not resume from (the cache
    // holds its pages without a snapshot there: a branch point, e.g. the end of a system prompt that
    // other conversations continue differently). Prefill stops there, captures and publishes, so the
    // next request sharing it resumes instead of recomputing. 0: none.
    int branch = 0;
    StreamPages pages;  // its page table and claims on the prefix cache
    std::unique_ptr<Generation> generation;
    // Choice 0 of a request with n > 1: the request the other choices fork from once the prompt is in.
    std::optional<Waiting> forks;
    int32_t next = -1;  // decoding: the token to feed at position pos
    const uint32_t* mask = nullptr;  // decoding: this step's allowed tokens (its generation's); null: any
    int64_t pos = 0;
    bool decoding = false;
    RequestTrace trace;
    PromptKey key;  // Waiting::key: no capture at a boundary it does not hold
  };

  // A report_prefix() call waiting for the loop; lives on its caller's stack until answered.
  struct PrefixQuery {
    const PromptKey* key;  // the prompt's cache key
    int64_t cached = 0, resumable = 0;
    bool answered = false;
  };

  void run();
  // The request's prompt: with its images (build_with_images under the plan's tower and the server's
  // image bounds) where the plan carries a vision tower; else build(), and a request with images is
  // a 400 saying this engine runs no images and why. Any thread.
  ImagePrompt prompt_of(const CompletionRequest& r) const;
  // Answers every queued PrefixQuery from the cache, read-only. Loop thread, between steps.
  // REQUIRES: mu_ held.
  void answer_queries();
  void admit();
  // One prompt's piece of a prefill call.
  struct Piece {
    int slot, n;
    bool last, want_logits;
    SamplingKnobs knobs;
    const uint32_t* mask;  // the first token's allowed tokens; null: unconstrained
    std::optional<PrefillCapture> inside;
  };
  // The streams decoding this step, their pages extended by the token they feed (retiring the
  // cancelled and the failed on the way).
  std::vector<int> decode_rows();
  // The rows as one decode call, then decoded().
  void decode_step(std::span<const int> rows);
  // The rows' picks (tokens()[i], logits(i)) handed to their generations.
  void decoded(std::span<const int> rows, bool want_logits);
  // Whether the stream's next step drafts: a drafting engine, a request that allows it (no forced
  // tokens or reasoning budget: generation.h speculates()), room in the context.
  bool drafts(const Stream& s) const;
  // The allowed-token masks of the next engine call's rows (BatchEngine::mask_next_picks), handed to
  // the engine only when some row has one.
  void mask_picks(std::span<const uint32_t* const> masks);
  // One stream's draft + verify step (its pages already extended by the token it feeds): emits the
  // accepted tokens and the pick after them.
  void speculative_step(int slot);
  // Prefill calls after the decode step, within what is left of the step's budget after `used`
  // prompt rows (those a mixed step carried).
  void prefill_step(int used);
  // The next piece of every prompt still prefilling, in admission order, within `budget` rows, one
  // call's rows and `max_segments` prompts.
  std::vector<Piece> prefill_round(int budget, int max_segments);
  PrefillSegment segment_of(const Piece& p) const;
  // The round's pieces computed; the picks of those that end a prompt are tokens()[first_pick + i].
  void prefilled(std::span<const Piece> round, int first_pick);
  // The decode rows and a round of prompt pieces as one prefill_batch call (StepContract::mixed_room),
  // the rows first; returns the prompt rows it carried, or -1 (nothing run) when there are no rows,
  // the contract leaves no room after them, or nothing waits to prefill (0 when the engine refused it).
  int mixed_step(std::span<const int> rows);
  // The engine refused a call the scheduler built (StepRefused, before any work): the streams in it
  // fail with the reason, the step's other work and every other stream go on.
  void refused(std::span<const int> slots, const StepRefused& e);
  // Leaves the stream's slot: detach (cache what was captured) or release on error.
  void retire(Stream& s, bool keep_cache);
  // This request alone failed: answered with `why` (unless it was already), its slot retired without
  // caching what it computed.
  void fail_stream(Stream& s, std::string_view why);
  // Every running and queued request answered with `why`; the queue is empty afterwards.
  void fail_all(std::string_view why);
  // 503 while draining or failed. REQUIRES: mu_ held.
  void check_open() const;
  void capture(Stream& s, int boundary);
  // Queues choices 1..n-1 of the stream's request at the head of the queue (its prompt is computed
  // and published, so they resume from the cache).
  void fork(Stream& s);
  // Binds the stream's page table after an extension, performing copy-on-extend first.
  void apply(Stream& s, const Extension& e);
  void refresh_stats();
  // Telemetry: the stream's engine pick reached its Generation; a request's trace ends.
  void traced_token(Stream& s);
  void end_trace(RequestTrace&& t, const Generation* g);
  // The grammar of a request's answer (null for none), compiled once per schema or tool set: its
  // response_format's, or its tool calls' when tool_choice is required or a named function, or auto
  // with a strict tool (grammar/tool_calls.h). Throws ProtocolError 400 when this engine cannot mask
  // its picks, or for a tool's parameters outside the grammar's subset.
  std::shared_ptr<const grammar::CompiledGrammar> grammar_of(const CompletionRequest& r);

  PromptBuilder prompts_;
  BatchEngine& engine_;
  ModelInfo model_;
  SchedulerOptions options_;
  const ForcedTokens* forced_;
  // Built on the first structured-output request (the vocabulary's trie), then shared.
  std::once_flag grammars_once_;
  std::unique_ptr<grammar::GrammarCache> grammars_;
  std::optional<int32_t> think_close_;  // the </think> token, after which a grammar starts
  // Images seen before, preprocessed (vision/patch_cache.h): an agent's resent screenshot is neither
  // decoded nor resampled again. 512 MiB: about 20 images of 1,024² (25 MB of float patches each).
  static constexpr size_t kSeenImageBytes = size_t(512) << 20;
  mutable PatchCache seen_images_{kSeenImageBytes};
  CacheGeometry geometry_;
  RadixCache cache_;
  int pad_page_ = -1;

  // Loop thread only.
  std::vector<std::optional<Stream>> slots_;
  std::deque<int> order_;  // slots by admission, oldest first

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Waiting> waiting_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  bool draining_ = false;  // drain() has begun: submit() refuses
  bool abort_ = false;     // drain()'s deadline passed: the loop answers everything left with an error
  // Nothing was running or queued at the end of the loop's last step, and nothing was submitted since.
  bool idle_ = true;
  std::string failure_;    // the engine's error; non-empty: the loop has ended
  std::condition_variable idle_cv_;  // idle_ or failure_ changed
  std::vector<PrefixQuery*> queries_;  // waiting for answer_queries()
  std::condition_variable query_cv_;   // a query answered, or the loop ended
  SchedulerStats stats_;
  std::thread thread_;
};

}  // namespace rocket
