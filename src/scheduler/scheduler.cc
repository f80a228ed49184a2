#include "scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "grammar/schema_error.h"
#include "openai/protocol_error.h"

namespace rocket {

using Json = nlohmann::ordered_json;

namespace {

// Answers a request that holds no slot (queued, or failing before it got one) with an error event,
// as Generation::fail does for a running one.
void refuse(uint64_t id, RequestSink& sink, std::string_view why) {
  std::fprintf(stderr, "[serve] request %llu: failed: %.*s\n", (unsigned long long)id, int(why.size()), why.data());
  TokenEvent e;
  e.done = true;
  e.error = std::string(why);
  sink.push(std::move(e));
}

// An ImagePrompt's images as the engine takes them: every image's patches, one after another, each
// grid and each digest. The patches are moved out of `images` (a 1,024² image's are 25 MB; one image,
// the common case, is not copied at all).
vision::PromptImages engine_images(std::vector<PromptImage>& images) {
  vision::PromptImages out;
  size_t values = 0;
  for (const PromptImage& im : images) values += im.pixels.values.size();
  if (images.size() == 1) out.patches = std::move(images[0].pixels.values);
  else out.patches.reserve(values);
  for (PromptImage& im : images) {
    if (images.size() > 1) out.patches.insert(out.patches.end(), im.pixels.values.begin(), im.pixels.values.end());
    im.pixels.values = {};
    out.grids.push_back({int(im.pixels.grid_t), int(im.pixels.grid_h), int(im.pixels.grid_w)});
    out.digests.push_back(im.digest);
  }
  return out;
}

// The prompt's cache key: its images keyed by their digests (cache/prompt_key.h).
PromptKey key_of(const ImagePrompt& p) {
  std::vector<KeyedImage> images;
  images.reserve(p.images.size());
  for (const PromptImage& im : p.images)
    images.push_back({.first_token = im.first_token, .tokens = im.pixels.vision_tokens, .digest = im.digest});
  return PromptKey::of(p.prompt.ids, images);
}

}  // namespace

Json SchedulerStats::to_json() const {
  return Json{{"requests", requests}, {"finished", finished}, {"cancelled", cancelled}, {"refused", refused},
              {"active", active}, {"waiting", waiting},
              {"prompt_tokens", prompt_tokens}, {"cached_tokens", cached_tokens},
              {"generated_tokens", generated_tokens}, {"steps", steps}, {"decode_rows", decode_rows},
              {"prefill_tokens", prefill_tokens}, {"mixed_steps", mixed_steps}, {"refused_steps", refused_steps},
              {"verify_steps", verify_steps}, {"drafted_tokens", drafted_tokens}, {"accepted_tokens", accepted_tokens},
              {"pages", pages}, {"pages_free", pages_free}, {"pages_cached", pages_cached}, {"page_tokens", page_tokens},
              {"snapshots", snapshots}, {"snapshots_free", snapshots_free}, {"snapshots_cached", snapshots_cached}};
}

Scheduler::Scheduler(PromptBuilder prompts, BatchEngine& engine, ModelInfo model, SchedulerOptions options,
                     const ForcedTokens* forced)
    : prompts_(std::move(prompts)), engine_(engine), model_(std::move(model)), options_(options), forced_(forced),
      geometry_(CacheGeometry::from_plan(engine.plan(), engine.plan().state_snapshots)), cache_(geometry_),
      slots_(size_t(engine.plan().max_streams)) {
  const int chunk = engine.contract().prefill_chunk();
  // Four bucket-sized chunks (the host's 32), or one call where a call is a long token-path piece.
  if (options_.prefill_budget <= 0) options_.prefill_budget = std::max(4 * std::min(chunk, 32), chunk);
  // Padding rows of a bucket write one token's KV somewhere: a page of their own, held for good.
  const std::optional<int> pad = cache_.alloc_page();
  CHECK(pad.has_value(), "a fresh cache pool has pages");
  pad_page_ = *pad;
  engine_.bind_pad_page(pad_page_);
  refresh_stats();
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  query_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& s : slots_)
    if (s) s->pages.release();
  cache_.pages().release(pad_page_);
}

namespace {

// The tool-call grammar a request asks for, or nullopt: tool_choice required (any tool) or a named
// function (that one) always, auto only when some tool is strict (non-strict ones then take any
// arguments). The answer is free text or calls in auto mode, or the response_format's JSON or calls.
std::optional<grammar::ToolCallsSpec> tool_calls_spec(const CompletionRequest& r, ToolCallFormat format) {
  if (r.kind != CompletionRequest::Kind::kChat || r.tools.empty()) return std::nullopt;
  grammar::ToolCallsSpec spec;
  spec.syntax = format == ToolCallFormat::kXml ? grammar::ToolSyntax::kXml : grammar::ToolSyntax::kJson;
  // A named function is exactly one call (the server stops after it, as for parallel_tool_calls false).
  spec.parallel = r.parallel_tool_calls && r.tool_choice.mode != ToolChoice::Mode::kFunction;
  switch (r.tool_choice.mode) {
    case ToolChoice::Mode::kNone:
      return std::nullopt;
    case ToolChoice::Mode::kFunction:
      for (const Tool& t : r.tools)
        if (t.name == r.tool_choice.function) spec.tools.push_back({t.name, t.parameters, true});
      return spec;
    case ToolChoice::Mode::kRequired:
      for (const Tool& t : r.tools) spec.tools.push_back({t.name, t.parameters, true});
      return spec;
    case ToolChoice::Mode::kAuto:
      break;
  }
  if (std::none_of(r.tools.begin(), r.tools.end(), [](const Tool& t) { return t.strict; })) return std::nullopt;
  spec.answer = grammar::ToolCallsSpec::Answer::kTextOrCalls;
  for (const Tool& t : r.tools) spec.tools.push_back({t.name, t.parameters, t.strict});
  if (r.response_format.kind != ResponseFormat::Kind::kText) {
    spec.content_json = true;
    if (r.response_format.kind == ResponseFormat::Kind::kJsonSchema) spec.content_schema = r.response_format.schema;
  }
  return spec;
}

}  // namespace

std::shared_ptr<const grammar::CompiledGrammar> Scheduler::grammar_of(const CompletionRequest& r) {
  const std::optional<grammar::ToolCallsSpec> tools = tool_calls_spec(r, prompts_.tool_call_format());
  if (r.response_format.kind == ResponseFormat::Kind::kText && !tools) return nullptr;
  if (!engine_.masks_picks()) {
    // Tool calls stay parsed, not enforced, on such an engine (README says so).
    if (r.response_format.kind == ResponseFormat::Kind::kText) return nullptr;
    throw ProtocolError(400, "response_format: this engine does not constrain its sampling yet; only 'text'.",
                        "response_format", "invalid_request_error", "unsupported_value");
  }
  std::call_once(grammars_once_, [&] {
    const Tokenizer& tok = prompts_.tokenizer();
    grammars_ = std::make_unique<grammar::GrammarCache>(
        grammar::Vocabulary{grammar::TokenTrie::build(tok, engine_.vocab()), prompts_.eos()});
    think_close_ = tok.token_id("</think>");
  });
  if (tools) {
    try {
      return grammars_->get(*tools);
    } catch (const grammar::SchemaError& e) {
      throw ProtocolError(400, fmt::format("Unsupported value for 'tools': a tool call is generated under a grammar of its "
                                           "parameters (tool_choice required or named, or strict tools), and at {}: {}.",
                                           e.path(), e.message()),
                          "tools", "invalid_request_error", "unsupported_value");
    }
  }
  try {
    return grammars_->get(r.response_format.kind == ResponseFormat::Kind::kJsonSchema ? r.response_format.schema
                                                                                       : nlohmann::ordered_json());
  } catch (const grammar::SchemaError& e) {  // parse_chat_request compiled it already; kept for other callers
    throw ProtocolError(400, fmt::format("Unsupported value for 'response_format.json_schema.schema': at {}: {}.", e.path(),
                                         e.message()),
                        "response_format.json_schema.schema", "invalid_request_error", "unsupported_value");
  }
}

ImagePrompt Scheduler::prompt_of(const CompletionRequest& r) const {
  const Plan& plan = engine_.plan();
  if (!plan.vision) {
    if (!r.images.empty())
      throw ProtocolError(400,
                          fmt::format("This engine does not run images: its plan carries no vision tower (the {} "
                                      "engine was built from a text-only fuel). Send the request without image parts.",
                                      plan.booster),
                          r.images.front().param, "invalid_request_error", "unsupported_value");
    return ImagePrompt{.prompt = prompts_.build(r, engine_.vocab(), plan.max_context), .images = {}};
  }
  // The plan's processor: the fuel's preprocessor_config.json (pixel bounds, geometry checked against
  // the tower at build time), or the releases' defaults it recorded.
  const ImageRules rules{.processor = plan.vision->processor, .limits = options_.image_limits, .seen = &seen_images_};
  return prompts_.build_with_images(r, engine_.vocab(), plan.max_context, rules);
}

Submitted Scheduler::submit(const CompletionRequest& r, std::shared_ptr<RequestSink> sink) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    check_open();  // before the prompt costs anything
  }
  // Each choice is a stream of its own.
  if (r.n > engine_.plan().max_streams)
    throw ProtocolError(400, fmt::format("Invalid value for 'n': this engine runs at most {} streams, got {}.",
                                         engine_.plan().max_streams, r.n),
                        "n", "invalid_request_error", "invalid_value");
  for (const LogitBias& b : r.logit_bias)
    if (b.token >= engine_.vocab())
      throw ProtocolError(400, fmt::format("Invalid value for 'logit_bias': token {} is outside the vocabulary [0, {}).",
                                           b.token, engine_.vocab()),
                          fmt::format("logit_bias.{}", b.token), "invalid_request_error", "invalid_value");
  ImagePrompt built = prompt_of(r);
  Prompt& p = built.prompt;
  PromptKey key = key_of(built);
  vision::PromptImages images = engine_images(built.images);
  built.images.clear();  // the patches live in `images` now
  if (r.min_tokens > p.max_tokens)
    throw ProtocolError(400,
                        fmt::format("Invalid value for 'min_tokens': {} is more than the {} tokens this request may "
                                    "generate (max_tokens, or what the context leaves after the prompt).",
                                    r.min_tokens, p.max_tokens),
                        "min_tokens", "invalid_request_error", "invalid_value");
  if (r.min_tokens > 0 && !engine_.masks_picks())
    throw ProtocolError(400, "min_tokens: this engine does not mask its sampling.", "min_tokens", "invalid_request_error",
                        "unsupported_value");
  std::shared_ptr<const grammar::CompiledGrammar> grammar = grammar_of(r);
  // A forced call's opening is in the prompt already; the grammar takes it first (its form without
  // the reasoning's close, which is no part of the answer).
  std::string primer = grammar ? forced_opening(r, /*reasoning_open=*/false, p.tool_call_format) : "";
  Submitted s;
  s.prompt_tokens = int64_t(p.ids.size());
  s.reasoning_open = p.reasoning_open;
  s.tool_call_format = p.tool_call_format;
  {
    std::lock_guard<std::mutex> lock(mu_);
    check_open();
    if (waiting_.size() >= options_.queue_capacity) {
      ++stats_.refused;
      throw ProtocolError(503, fmt::format("the server is busy: {} requests are waiting; retry later", waiting_.size()),
                          "", "server_error", "server_busy");
    }
    s.id = next_id_++;
    ++stats_.requests;
    idle_ = false;
    waiting_.push_back(Waiting{s.id, std::move(p), r, std::move(sink), Telemetry::begin(r, r.trace_parent), 0,
                               std::move(grammar), std::move(primer), std::move(images), std::move(key)});
    // The client's image bytes are preprocessed into `images`: a queued request holds only those.
    for (ImageInput& im : waiting_.back().request.images) std::vector<uint8_t>().swap(im.bytes);
  }
  cv_.notify_one();
  return s;
}

Json Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_.to_json();
}

PrefixReport Scheduler::report_prefix(const CompletionRequest& r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    check_open();  // before the prompt costs anything
  }
  const ImagePrompt built = prompt_of(r);
  const Prompt& p = built.prompt;
  const PromptKey key = key_of(built);
  PrefixQuery q{.key = &key};
  std::unique_lock<std::mutex> lock(mu_);
  check_open();
  queries_.push_back(&q);
  cv_.notify_one();
  query_cv_.wait(lock, [&] { return q.answered || stopping_ || !failure_.empty(); });
  if (!q.answered) {
    queries_.erase(std::find(queries_.begin(), queries_.end(), &q));
    check_open();
    throw ProtocolError(503, "the server is stopping", "", "server_error", "shutting_down");
  }
  return PrefixReport{.prompt_tokens = int64_t(p.ids.size()),
                      .cached_tokens = q.cached,
                      .resumable_tokens = q.resumable,
                      .running = stats_.active,
                      .waiting = int(waiting_.size())};
}

void Scheduler::answer_queries() {
  const int page = geometry_.page_tokens;
  for (PrefixQuery* q : queries_) {
    const PromptKey& key = *q->key;
    const std::span<const int32_t> tokens = key.tokens;
    const int n = int(tokens.size());
    // As admission caps them: StreamPages::resume leaves the last token to compute (and steps back
    // from a boundary the key does not hold), and the branch point is at most the last whole page
    // before it that the key holds.
    q->resumable = n < 2 ? 0 : cache_.resumable_prefix(tokens.first(size_t(n - 1)));
    while (!key.holds(int(q->resumable)))
      q->resumable = cache_.resumable_prefix(tokens.first(size_t(key.held_page_at_or_before(int(q->resumable), page))));
    q->cached = key.held_page_at_or_before(std::min(cache_.cached_prefix(tokens), std::max(n - 1, 0)), page);
    q->answered = true;
  }
  queries_.clear();
  query_cv_.notify_all();
}

LoopState Scheduler::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.empty()) return {LoopState::Status::kFailed, failure_};
  if (draining_) return {LoopState::Status::kDraining, ""};
  return {};
}

void Scheduler::check_open() const {
  if (!failure_.empty())
    throw ProtocolError(503, fmt::format("the engine failed ({}); the server is exiting to be restarted", failure_), "",
                        "server_error", "engine_failed");
  if (draining_)
    throw ProtocolError(503, "the server is shutting down and accepts no new requests; retry on another replica", "",
                        "server_error", "shutting_down");
}

int Scheduler::drain(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  draining_ = true;
  const auto done = [&] { return idle_ || !failure_.empty(); };
  if (idle_cv_.wait_until(lock, deadline, done)) return 0;
  const int left = stats_.active + int(waiting_.size());
  abort_ = true;
  cv_.notify_one();
  idle_cv_.wait(lock, done);  // the loop's current step, then the aborts
  return left;
}

void Scheduler::run() {
  for (;;) {
    bool abort = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || abort_ || !waiting_.empty() || !order_.empty() || !queries_.empty(); });
      if (stopping_) return;
      answer_queries();
      abort = std::exchange(abort_, false);
    }
    try {
      if (abort) fail_all("the server is shutting down: the request was aborted at the drain deadline");
      admit();
      // Prompts waiting while streams decode ride in the decode step when the engine can mix them
      // (one call, the weights read once), else a prefill call follows the decode step.
      // Streams that draft run their own draft + verify steps after the others' decode step.
      std::vector<int> rows = decode_rows(), drafting;
      std::erase_if(rows, [&](int slot) {
        const bool d = drafts(*slots_[size_t(slot)]);
        if (d) drafting.push_back(slot);
        return d;
      });
      const int mixed = mixed_step(rows);
      if (mixed < 0) decode_step(rows);
      for (int slot : drafting) speculative_step(slot);
      prefill_step(std::max(mixed, 0));
    } catch (const std::exception& e) {
      // The engine failed in a step: the device state of every slot is unknown (a CUDA fault poisons
      // the context), so nothing more runs on it. Every request is answered, and the process exits to
      // be restarted rather than serve on a dead context.
      std::fprintf(stderr, "[scheduler] engine failed, serving stops: %s\n", e.what());
      {
        std::lock_guard<std::mutex> lock(mu_);
        failure_ = e.what();
        if (failure_.empty()) failure_ = "unknown engine error";
      }
      fail_all(fmt::format("the engine failed: {}", e.what()));
      {
        std::lock_guard<std::mutex> lock(mu_);
        refresh_stats();
        idle_ = true;
      }
      idle_cv_.notify_all();
      query_cv_.notify_all();
      if (options_.on_failure) options_.on_failure();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.steps;
      refresh_stats();
      idle_ = waiting_.empty() && order_.empty();
    }
    idle_cv_.notify_all();
  }
}

void Scheduler::fail_all(std::string_view why) {
  for (int slot : std::deque<int>(order_)) fail_stream(*slots_[size_t(slot)], why);
  std::deque<Waiting> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued.swap(waiting_);
  }
  for (const Waiting& w : queued) refuse(w.id, *w.sink, why);
}

void Scheduler::fail_stream(Stream& s, std::string_view why) {
  if (!s.generation->finished()) s.generation->fail(why);
  retire(s, /*keep_cache=*/false);
}

void Scheduler::admit() {
  for (;;) {
    auto free_slot = std::find_if(slots_.begin(), slots_.end(), [](const auto& s) { return !s.has_value(); });
    Waiting w;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Requests whose clients left while queued go without touching the engine.
      while (!waiting_.empty() && waiting_.front().sink->cancelled()) {
        ++stats_.cancelled;
        end_trace(std::move(waiting_.front().trace), nullptr);
        waiting_.pop_front();
      }
      if (waiting_.empty() || free_slot == slots_.end()) return;
      w = std::move(waiting_.front());
      waiting_.pop_front();
    }
    const int slot = int(free_slot - slots_.begin());
    // The cache is asked with the prompt's key (its images keyed by content), the engine runs the ids.
    const std::span<const int32_t> key = w.key.tokens;
    const int prompt_n = int(key.size());
    const int page = geometry_.page_tokens;
    StreamPages pages = StreamPages::resume(cache_, key);
    // No stream captures where its key does not hold, so a resumed boundary holds; should one not
    // (two images' keys agreeing on their first tokens by chance), resume below it instead.
    while (!w.key.holds(pages.length()))
      pages = StreamPages::resume(cache_, key.first(size_t(w.key.held_page_at_or_before(pages.length(), page)) + 1));
    const int resumed = pages.length();
    // Like resume(), leave at least the last token to compute.
    const int shared = w.key.held_page_at_or_before(std::min(cache_.cached_prefix(key), prompt_n - 1), page);
    std::optional<Extension> ext = pages.extend(key.subspan(size_t(resumed)));
    if (!ext) {
      pages.release();
      if (order_.empty()) {
        // Nothing running could ever return pages: the request cannot be served at all.
        Generation g(w.id, w.request, w.prompt.ids, w.prompt.max_tokens, prompts_.tokenizer(), prompts_.eos(), w.sink,
                     forced_, w.choice);
        g.fail("the KV cache cannot hold this prompt");
        if (options_.telemetry) options_.telemetry->metrics().refused(Refusal::kKvCacheFull);
        end_trace(std::move(w.trace), &g);
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.refused;
        continue;
      }
      // Wait at the head of the queue for pages; nobody behind overtakes.
      std::lock_guard<std::mutex> lock(mu_);
      waiting_.push_front(std::move(w));
      return;
    }
    std::optional<double> restore_seconds;
    try {
      auto gen = std::make_unique<Generation>(w.id, w.request, w.prompt.ids, w.prompt.max_tokens, prompts_.tokenizer(),
                                              prompts_.eos(), w.sink, forced_, w.choice);
      gen->set_cached_tokens(resumed);
      if (gen->adjusts()) engine_.reset_history(slot, w.prompt.ids, gen->logit_bias());
      // With reasoning open the grammar waits for </think>: the reasoning is free text. A forced call's
      // opening closed the reasoning in the prompt.
      if (w.grammar)
        gen->constrain(w.grammar, w.prompt.reasoning_open && w.grammar_primer.empty() ? think_close_ : std::nullopt,
                       w.grammar_primer);
      if (w.request.min_tokens > 0) gen->hold_eos(engine_.vocab());
      // thinking.budget_tokens: the reasoning the prompt opened is closed once the budget is spent.
      if (w.request.reasoning_budget >= 0 && w.prompt.reasoning_open)
        if (const std::optional<int32_t> close = prompts_.tokenizer().token_id("</think>"))
          gen->budget_reasoning(*close, w.request.reasoning_budget);
      std::optional<Waiting> forks;
      if (w.choice == 0 && w.request.n > 1) forks = w;
      Stream& s = slots_[size_t(slot)].emplace(Stream{.id = w.id,
                                                      .slot = slot,
                                                      .prompt = std::move(w.prompt.ids),
                                                      .computed = resumed,
                                                      .branch = shared > resumed ? shared : 0,
                                                      .pages = std::move(pages),
                                                      .generation = std::move(gen),
                                                      .forks = std::move(forks),
                                                      .trace = std::move(w.trace),
                                                      .key = std::move(w.key)});
      order_.push_back(slot);
      if (s.pages.restore_snapshot()) {
        const auto t0 = std::chrono::steady_clock::now();
        engine_.restore_state(*s.pages.restore_snapshot(), slot);
        restore_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } else {
        engine_.reset_state(slot);
      }
      // Both forget the slot's images: this admission's (choice 0 or a fork) are set again, past the
      // tokens the cache restored.
      if (!w.images.empty()) engine_.set_images(slot, s.prompt, w.images, resumed);
      apply(s, *ext);
    } catch (const std::exception& e) {
      // Admitting this one request failed: it alone is answered, and its slot, pages and snapshot
      // claims go back; whether the engine itself is sound shows in the next step.
      std::fprintf(stderr, "[scheduler] admitting request %llu failed: %s\n", (unsigned long long)w.id, e.what());
      const std::string why = fmt::format("admitting the request failed: {}", e.what());
      if (slots_[size_t(slot)]) {
        fail_stream(*slots_[size_t(slot)], why);
      } else {
        pages.release();
        refuse(w.id, *w.sink, why);
      }
      continue;
    }
    Stream& s = *slots_[size_t(slot)];
    if (options_.telemetry) options_.telemetry->admitted(s.trace, int64_t(s.prompt.size()), resumed, restore_seconds);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.prompt_tokens += int64_t(s.prompt.size());
    stats_.cached_tokens += resumed;
  }
}

void Scheduler::apply(Stream& s, const Extension& e) {
  if (e.copy) engine_.copy_page(e.copy->src, e.copy->dst, e.copy->tokens);
  engine_.bind_pages(s.slot, s.pages.pages());
}

void Scheduler::capture(Stream& s, int boundary) {
  if (boundary % geometry_.page_tokens != 0 || boundary <= s.pages.captured_tokens() || !s.key.holds(boundary)) return;
  if (std::optional<int> snap = s.pages.capture_snapshot(boundary)) engine_.capture_state(s.slot, *snap);
}

void Scheduler::fork(Stream& s) {
  if (!s.forks) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (int c = int(s.forks->request.n) - 1; c >= 1; --c) {
    Waiting w = *s.forks;
    w.choice = c;
    waiting_.push_front(std::move(w));
  }
  s.forks.reset();
}

void Scheduler::retire(Stream& s, bool keep_cache) {
  const int slot = s.slot;
  if (keep_cache) s.pages.detach();
  else s.pages.release();
  const bool answered = s.generation->answered();
  if (!answered && !s.generation->finished())
    std::fprintf(stderr, "[serve] request %llu: cancelled (client gone) after %d prompt tokens\n",
                 (unsigned long long)s.id, s.computed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (answered) ++stats_.finished;
    else ++stats_.cancelled;
  }
  end_trace(std::move(s.trace), s.generation.get());
  order_.erase(std::find(order_.begin(), order_.end(), slot));
  slots_[size_t(slot)].reset();
}

std::vector<int> Scheduler::decode_rows() {
  std::vector<int> rows;
  for (int slot : std::deque<int>(order_)) {
    Stream& s = *slots_[size_t(slot)];
    if (!s.decoding) continue;
    if (s.generation->cancelled()) {
      retire(s, /*keep_cache=*/true);
      continue;
    }
    s.mask = s.generation->token_mask();
    if (s.generation->finished()) {  // its grammar has no continuation: the request failed
      retire(s, /*keep_cache=*/true);
      continue;
    }
    // Its pages hold every token it computed, and the one it feeds next goes at s.pos; otherwise what
    // it would cache is not what it computed (a scheduler bug): this request fails, nothing else.
    if (s.pages.length() != s.pos) {
      fail_stream(s, fmt::format("internal error: the stream's cache pages hold {} tokens at position {}", s.pages.length(), s.pos));
      continue;
    }
    const int32_t id = s.next;
    std::optional<Extension> ext = s.pages.extend(std::span<const int32_t>(&id, 1));
    if (!ext) {
      s.generation->fail("the KV cache ran out of pages");
      retire(s, /*keep_cache=*/false);
      continue;
    }
    apply(s, *ext);
    rows.push_back(slot);
  }
  return rows;
}

void Scheduler::decode_step(std::span<const int> rows) {
  if (rows.empty()) return;
  const int n = int(rows.size());
  std::vector<int32_t> ids(rows.size());
  std::vector<int64_t> pos(rows.size());
  std::vector<SamplingKnobs> knobs(rows.size());
  std::vector<const uint32_t*> masks(rows.size());
  // The engine samples every row; the logits come back only when a row needs them for logprobs.
  bool want_logits = false;
  for (int i = 0; i < n; ++i) {
    const Stream& s = *slots_[size_t(rows[size_t(i)])];
    ids[size_t(i)] = s.next;
    pos[size_t(i)] = s.pos;
    knobs[size_t(i)] = s.generation->knobs(s.pos + 1, s.slot);
    masks[size_t(i)] = s.mask;
    want_logits = want_logits || s.generation->needs_logits();
  }
  mask_picks(masks);
  try {
    engine_.decode(n, ids.data(), rows.data(), pos.data(), knobs.data(), want_logits);
  } catch (const StepRefused& e) {
    refused(rows, e);
    return;
  }
  decoded(rows, want_logits);
}

void Scheduler::decoded(std::span<const int> rows, bool want_logits) {
  const int n = int(rows.size());
  const int32_t* picked = engine_.tokens();
  if (options_.telemetry) {
    double context = 0;
    for (int slot : rows) context += double(slots_[size_t(slot)]->pos) / n;
    options_.telemetry->decode_step(n, context);
  }
  for (int i = 0; i < n; ++i) {
    Stream& s = *slots_[size_t(rows[size_t(i)])];
    capture(s, int(s.pos + 1));
    traced_token(s);
    std::optional<int32_t> next;
    try {
      next = s.generation->step(picked[i], want_logits ? engine_.logits(i) : nullptr, engine_.vocab());
    } catch (const std::exception& e) {
      fail_stream(s, e.what());  // this request's own output (e.g. a forced token outside the vocabulary)
      continue;
    }
    if (!next) {
      retire(s, /*keep_cache=*/true);
      continue;
    }
    s.next = *next;
    ++s.pos;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.decode_rows += n;
  stats_.generated_tokens += n;
}

void Scheduler::mask_picks(std::span<const uint32_t* const> masks) {
  if (std::any_of(masks.begin(), masks.end(), [](const uint32_t* m) { return m; })) engine_.mask_next_picks(masks);
}

bool Scheduler::drafts(const Stream& s) const {
  return engine_.draft_tokens() > 0 && s.generation->speculates() && s.pos + 1 < engine_.contract().max_context();
}

void Scheduler::speculative_step(int slot) {
  Stream& s = *slots_[size_t(slot)];
  const int k = int(std::min<int64_t>(engine_.draft_tokens(), engine_.contract().max_context() - 1 - s.pos));
  const int64_t pos = s.pos;
  std::vector<int32_t> ids(size_t(k) + 1, s.next);
  // Pages for the draft's rows first (the engine writes the MTP layer's KV at them while drafting);
  // the drafts replace the placeholders before anything reads them, and the rejected ones go again.
  std::optional<Extension> ext = s.pages.extend(std::span<const int32_t>(ids.data() + 1, size_t(k)));
  if (!ext) {  // no pages for drafts: this step decodes plainly
    decode_step(std::span<const int>(&slot, 1));
    return;
  }
  apply(s, *ext);
  try {
    engine_.draft(s.slot, s.next, pos, k, ids.data() + 1);
  } catch (const StepRefused& e) {
    refused(std::span<const int>(&slot, 1), e);
    return;
  }
  // Under a grammar or min_tokens every verified row picks under its own mask, as the decode step at
  // its position would; the drafts end where a mask refuses one, and with none left this step decodes
  // plainly (the draft's first MTP row, the next token's, is the one decode writes too).
  const int kept = s.generation->mask_drafts(std::span<const int32_t>(ids.data() + 1, size_t(k)), s.mask);
  s.pages.truncate(int(pos) + 1 + kept);
  if (kept == 0) {
    decode_step(std::span<const int>(&slot, 1));
    return;
  }
  std::vector<SamplingKnobs> knobs;
  std::vector<const uint32_t*> masks;
  for (int j = 0; j <= kept; ++j) {
    knobs.push_back(s.generation->knobs(pos + 1 + j, s.slot));
    masks.push_back(s.generation->draft_mask(j));
  }
  int accepted = 0;
  try {
    s.pages.rewrite_tail(std::span<const int32_t>(ids.data() + 1, size_t(kept)));
    mask_picks(masks);
    accepted = engine_.verify(s.slot, ids.data(), kept, pos, knobs.data());
  } catch (const StepRefused& e) {
    refused(std::span<const int>(&slot, 1), e);
    return;
  }
  s.pages.truncate(int(pos) + 1 + accepted);
  // The prefix cache's boundary inside the step: the state after the row that ends it.
  const int P = geometry_.page_tokens;
  const int boundary = int((pos + 1 + accepted) / P * P);
  if (boundary >= pos + 1 && boundary > s.pages.captured_tokens() && s.key.holds(boundary)) {
    if (std::optional<int> snap = s.pages.capture_snapshot(boundary)) engine_.capture_verified(int(boundary - pos - 1), *snap);
  }
  if (options_.telemetry) {
    options_.telemetry->decode_step(1, double(pos));
    options_.telemetry->verify_step(kept, accepted);
  }
  {  // counted before the tokens reach their client, as the metrics are
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.verify_steps;
    stats_.drafted_tokens += kept;
    stats_.accepted_tokens += accepted;
  }
  const int32_t* picked = engine_.tokens();
  int emitted = 0;
  for (int j = 0; j <= accepted; ++j) {
    traced_token(s);
    std::optional<int32_t> next;
    try {
      next = s.generation->step(picked[j], s.generation->needs_logits() ? engine_.logits(j) : nullptr, engine_.vocab());
    } catch (const std::exception& e) {
      fail_stream(s, e.what());
      break;
    }
    ++emitted;
    if (!next) {
      retire(s, /*keep_cache=*/true);
      break;
    }
    // NOTE: a drafting request feeds back what it picks (speculates()); the rows after it were
    // computed with that pick, so one that did not would continue from rows it never had.
    if (*next != picked[j]) {
      fail_stream(s, "internal error: a speculative step's pick was replaced by its generation");
      break;
    }
    s.next = *next;
    ++s.pos;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.decode_rows += accepted + 1;
  stats_.generated_tokens += emitted;
}

std::vector<Scheduler::Piece> Scheduler::prefill_round(int budget, int max_segments) {
  const int chunk = engine_.contract().prefill_chunk();
  std::vector<Piece> round;
  int rows = 0;
  for (int slot : std::deque<int>(order_)) {
    if (rows >= std::min(budget, chunk) || int(round.size()) >= max_segments) break;
    Stream& s = *slots_[size_t(slot)];
    if (s.decoding) continue;
    if (s.generation->cancelled()) {
      retire(s, /*keep_cache=*/true);
      continue;
    }
    const int total = int(s.prompt.size());
    if (s.computed >= total) continue;
    int n = std::min({chunk - rows, total - s.computed, budget - rows});
    if (s.branch > s.computed) n = std::min(n, s.branch - s.computed);
    const bool last = s.computed + n == total;
    const uint32_t* mask = last ? s.generation->token_mask() : nullptr;
    if (s.generation->finished()) {  // its grammar has no first token: the request failed
      retire(s, /*keep_cache=*/false);
      continue;
    }
    // The prompt's last piece picks its first token in the engine, as decode picks every later one.
    Piece p{.slot = slot,
            .n = n,
            .last = last,
            .want_logits = last && s.generation->needs_logits(),
            .knobs = s.generation->knobs(total, slot),
            .mask = mask,
            .inside = {}};
    // The cache resumes from the last page boundary a publish reaches: when this piece passes one
    // without ending on it, the engine snapshots there inside the call.
    const int page = geometry_.page_tokens, boundary = (s.computed + n) / page * page;
    if (boundary > s.computed && boundary < s.computed + n && boundary > s.pages.captured_tokens() &&
        s.key.holds(boundary))
      if (std::optional<int> snap = s.pages.capture_snapshot(boundary))
        p.inside = PrefillCapture{.tokens = boundary - s.computed, .snapshot = *snap};
    round.push_back(p);
    rows += n;
  }
  return round;
}

void Scheduler::prefilled(std::span<const Piece> round, int first_pick) {
  int prefilled = 0;
  for (size_t i = 0; i < round.size(); ++i) {
    const Piece& p = round[i];
    Stream& s = *slots_[size_t(p.slot)];
    s.computed += p.n;
    prefilled += p.n;
    capture(s, s.computed);
    if (s.computed == s.branch) s.pages.publish();  // the branch point is resumable from now on
    if (!p.last) continue;
    s.pages.publish();  // concurrent requests sharing this prompt hit from now on
    traced_token(s);
    fork(s);            // and so do this request's other choices
    const int at = first_pick + int(i);
    std::optional<int32_t> next;
    try {
      next = s.generation->step(engine_.tokens()[at], p.want_logits ? engine_.logits(at) : nullptr, engine_.vocab());
    } catch (const std::exception& e) {
      fail_stream(s, e.what());
      continue;
    }
    if (!next) {
      retire(s, /*keep_cache=*/true);
      continue;
    }
    s.next = *next;
    s.pos = int64_t(s.prompt.size());
    s.decoding = true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.prefill_tokens += prefilled;
}

void Scheduler::prefill_step(int used) {
  const bool decoding = std::any_of(order_.begin(), order_.end(), [&](int slot) { return slots_[size_t(slot)]->decoding; });
  // With nothing decoding there is no latency to keep: four budgets, and at least one full call.
  const int full = std::max(4 * options_.prefill_budget, engine_.contract().prefill_chunk());
  int budget = (decoding ? options_.prefill_budget : full) - used;
  // Rounds: each takes the next piece of every prompt still prefilling, in admission order, up to the
  // budget and one call's rows, and runs them as one engine call (the weights read once for all).
  while (budget > 0) {
    const std::vector<Piece> round = prefill_round(budget, engine_.contract().max_streams());
    if (round.empty()) break;
    std::vector<const uint32_t*> masks;
    for (const Piece& p : round) masks.push_back(p.mask);
    mask_picks(masks);
    for (const Piece& p : round) budget -= p.n;
    try {
      if (round.size() == 1) {
        const Piece& p = round[0];
        const Stream& s = *slots_[size_t(p.slot)];
        engine_.prefill(p.slot, s.prompt.data() + s.computed, p.n, s.computed, p.last ? &p.knobs : nullptr, p.want_logits,
                        p.inside ? &*p.inside : nullptr);
      } else {
        std::vector<PrefillSegment> segments;
        for (const Piece& p : round) segments.push_back(segment_of(p));
        engine_.prefill_batch(segments, 0);
      }
    } catch (const StepRefused& e) {
      std::vector<int> slots;
      for (const Piece& p : round) slots.push_back(p.slot);
      refused(slots, e);
      continue;
    }
    prefilled(round, 0);
  }
}

PrefillSegment Scheduler::segment_of(const Piece& p) const {
  const Stream& s = *slots_[size_t(p.slot)];
  return {.slot = p.slot,
          .ids = s.prompt.data() + s.computed,
          .n = p.n,
          .pos0 = s.computed,
          .knobs = p.last ? &p.knobs : nullptr,
          .want_logits = p.want_logits,
          .capture = p.inside ? &*p.inside : nullptr};
}

int Scheduler::mixed_step(std::span<const int> rows) {
  const int d = int(rows.size());
  if (d == 0) return -1;
  const MixedRoom room = engine_.contract().mixed_room(d);
  const int budget = std::min(options_.prefill_budget, room.rows);
  if (budget <= 0 || room.segments <= 0) return -1;
  const std::vector<Piece> round = prefill_round(budget, room.segments);
  if (round.empty()) return -1;
  // Decode rows first (one-row segments, each picking its next token as decode would), then the
  // prompts' pieces: one engine call, every weight read once for both.
  std::vector<SamplingKnobs> knobs(rows.size());
  std::vector<const uint32_t*> masks;
  std::vector<PrefillSegment> segments;
  bool want_logits = false;
  for (int i = 0; i < d; ++i) {
    const Stream& s = *slots_[size_t(rows[size_t(i)])];
    knobs[size_t(i)] = s.generation->knobs(s.pos + 1, s.slot);
    want_logits = want_logits || s.generation->needs_logits();
    masks.push_back(s.mask);
  }
  for (int i = 0; i < d; ++i) {
    const Stream& s = *slots_[size_t(rows[size_t(i)])];
    segments.push_back({.slot = s.slot, .ids = &s.next, .n = 1, .pos0 = s.pos, .knobs = &knobs[size_t(i)],
                        .want_logits = want_logits, .capture = nullptr});
  }
  for (const Piece& p : round) {
    segments.push_back(segment_of(p));
    masks.push_back(p.mask);
  }
  mask_picks(masks);
  try {
    engine_.prefill_batch(segments, d);
  } catch (const StepRefused& e) {
    std::vector<int> slots(rows.begin(), rows.end());
    for (const Piece& p : round) slots.push_back(p.slot);
    refused(slots, e);
    return 0;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.mixed_steps;
  }
  decoded(rows, want_logits);
  prefilled(round, d);
  int carried = 0;
  for (const Piece& p : round) carried += p.n;
  return carried;
}

void Scheduler::refused(std::span<const int> slots, const StepRefused& e) {
  std::fprintf(stderr, "[scheduler] STEP REFUSED (a scheduler bug: the step broke the plan's contract; its %zu streams "
               "fail, the others go on): %s\n", slots.size(), e.what());
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.refused_steps;
  }
  for (int slot : slots)
    if (slots_[size_t(slot)]) fail_stream(*slots_[size_t(slot)], fmt::format("the engine refused the step: {}", e.what()));
}

void Scheduler::traced_token(Stream& s) {
  if (options_.telemetry) options_.telemetry->token(s.trace);
}

void Scheduler::end_trace(RequestTrace&& t, const Generation* g) {
  if (!options_.telemetry) return;
  if (!g || !g->answered()) {
    t.error = "cancelled: the client left";
  } else if (g->finish_reason()) {
    t.output_tokens = g->completion_tokens();
    t.finish_reason = std::string(finish_reason_name(*g->finish_reason()));
  } else {
    t.output_tokens = g->completion_tokens();
    t.error = "failed in the engine";
  }
  options_.telemetry->ended(std::move(t));
}

void Scheduler::refresh_stats() {
  int active = 0;
  for (const auto& s : slots_) active += s.has_value();
  stats_.active = active;
  stats_.waiting = int(waiting_.size());
  stats_.pages = cache_.pages().size();
  stats_.page_tokens = engine_.plan().kv_page_tokens;
  stats_.pages_free = cache_.pages().free_count();
  stats_.pages_cached = cache_.cached_pages();
  stats_.snapshots = cache_.snapshots().size();
  stats_.snapshots_free = cache_.snapshots().free_count();
  stats_.snapshots_cached = cache_.cached_snapshots();
}

}  // namespace rocket
