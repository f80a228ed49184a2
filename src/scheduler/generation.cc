#include "scheduler/generation.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "openai/logprobs.h"

namespace rocket {

// ---- RequestSink ----

void RequestSink::push(TokenEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  cv_.notify_one();
}

std::optional<TokenEvent> RequestSink::pop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  TokenEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

// ---- ForcedTokens ----

ForcedTokens ForcedTokens::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("--force-tokens {}: cannot read", path);
  const nlohmann::json doc = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) fail("--force-tokens {}: not a JSON object", path);
  ForcedTokens out;
  for (const auto& [name, seq] : doc.items()) {
    const bool ids = seq.is_array() && std::all_of(seq.begin(), seq.end(), [](const nlohmann::json& v) {
      return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX;
    });
    if (!seq.is_string() && !ids) fail("--force-tokens {}: '{}' is neither a string nor an array of token ids", path, name);
    out.sequences_.emplace(name, seq);
  }
  return out;
}

std::optional<std::vector<int32_t>> ForcedTokens::find(std::string_view user, const Tokenizer& tokenizer) const {
  const auto it = sequences_.find(user);
  if (it == sequences_.end()) return std::nullopt;
  if (it->second.is_string()) return tokenizer.encode(it->second.get<std::string>());
  return it->second.get<std::vector<int32_t>>();
}

// ---- Generation ----

Generation::Generation(uint64_t id, const CompletionRequest& request, std::vector<int32_t> prompt, int64_t max_tokens,
                       const Tokenizer& tokenizer, const std::vector<int32_t>& eos, std::shared_ptr<RequestSink> sink,
                       const ForcedTokens* forced, int choice)
    : id_(id), prompt_(std::move(prompt)), max_tokens_(max_tokens), tokenizer_(tokenizer), eos_(eos),
      sink_(std::move(sink)), logit_bias_(request.logit_bias), choice_(choice), decoder_(tokenizer), stops_(request.stop),
      ignore_eos_(request.ignore_eos), min_tokens_(request.min_tokens), started_(std::chrono::steady_clock::now()) {
  CHECK(max_tokens_ >= 1, "a generation needs room for one token");
  CHECK(choice >= 0 && choice < request.n && logit_bias_.size() <= size_t(kMaxLogitBias), "generation arguments");
  knobs_.temperature = float(request.temperature);
  knobs_.top_p = float(request.top_p);
  knobs_.top_k = request.top_k > 0 ? int32_t(request.top_k) : 0;
  knobs_.min_p = float(request.min_p);
  knobs_.presence_penalty = float(request.presence_penalty);
  knobs_.frequency_penalty = float(request.frequency_penalty);
  knobs_.repetition_penalty = float(request.repetition_penalty);
  knobs_.logit_bias = int32_t(logit_bias_.size());
  // Unsigned wrap-around: seed + choice is defined for every seed.
  knobs_.seed = (request.seed ? uint64_t(*request.seed) : std::random_device{}() * 0x100000001ull) + uint64_t(choice);
  usage_.prompt_tokens = int64_t(prompt_.size());
  if (request.logprobs) top_logprobs_ = request.top_logprobs;
  speculative_ = request.speculative.value_or(true);
  if (forced && !request.user.empty()) {
    forced_ = forced->find(request.user, tokenizer_);
    if (forced_)
      std::fprintf(stderr, "[serve] request %llu: TEST-ONLY forced tokens '%s' (%zu tokens) instead of sampling\n",
                   (unsigned long long)id_, request.user.c_str(), forced_->size());
  }
}

void Generation::constrain(std::shared_ptr<const grammar::CompiledGrammar> grammar, std::optional<int32_t> after,
                           std::string_view primer) {
  CHECK(usage_.completion_tokens == 0 && !finished_, "a grammar applies from the first token");
  // A forced sequence (TEST-ONLY) is the test's script, not the model's picks: the grammar, which
  // masks picks, has nothing to mask (and the script may run past a call the server stops at).
  if (forced_) return;
  mask_.resize(size_t(grammar->vocabulary().trie.mask_words()));
  matcher_.emplace(std::move(grammar));
  CHECK(matcher_->advance_bytes(primer), "the grammar does not accept the prompt's forced opening");
  grammar_after_ = after;
}

void Generation::hold_eos(int vocab) {
  CHECK(usage_.completion_tokens == 0 && !finished_ && vocab > 0, "min_tokens holds eos from the first token");
  eos_held_.assign(size_t((vocab + 31) / 32), ~0u);
  if (vocab % 32) eos_held_.back() = (1u << (vocab % 32)) - 1;
  for (int32_t id : eos_)
    if (id >= 0 && id < vocab) eos_held_[size_t(id / 32)] &= ~(1u << (id % 32));
}

const uint32_t* Generation::token_mask() {
  CHECK(!finished_, "token_mask() on a finished generation");
  int allowed = 0;
  const std::span<const uint32_t> mask =
      pick_mask(mask_, usage_.completion_tokens, !grammar_after_, grammar::Matcher::kMaskWork, allowed);
  if (allowed == grammar::Matcher::kTooComplex) {
    fail(fmt::format("structured output: the grammar is too complex to enforce at speed: after {} bytes of output, the "
                     "next token's mask needed more than {} parser steps (a schema with thousands of alternatives at "
                     "one point: properties, enum values or anyOf branches); simplify the schema or the tools",
                     matcher_->position(), grammar::Matcher::kMaskWork),
         400);
    return nullptr;
  }
  if (allowed == 0) {
    fail(fmt::format("structured output: no token of the vocabulary can continue the response format after {} bytes "
                     "of output", matcher_->position()));
    return nullptr;
  }
  return mask.data();
}

std::span<const uint32_t> Generation::pick_mask(std::span<uint32_t> out, int64_t completion, bool grammar_on,
                                                uint64_t budget, int& allowed) {
  const bool hold = completion < min_tokens_ && !eos_held_.empty();
  allowed = 1;
  if (!matcher_ || !grammar_on) return hold ? std::span<const uint32_t>(eos_held_) : std::span<const uint32_t>();
  allowed = matcher_->fill_mask(out, budget);
  if (allowed > 0 && hold) {
    // Eos comes out of the grammar's mask unless the grammar allows nothing else: a format that is
    // complete ends the output before min_tokens.
    bool other = false;
    for (size_t w = 0; w < out.size(); ++w) other |= (out[w] & eos_held_[w]) != 0;
    if (other)
      for (size_t w = 0; w < out.size(); ++w) out[w] &= eos_held_[w];
  }
  return out;
}

size_t Generation::mask_width(const uint32_t* mask) const {
  if (!mask) return 0;
  if (mask == eos_held_.data()) return eos_held_.size();
  CHECK(mask == mask_.data(), "a mask this generation did not make");
  return mask_.size();
}

int Generation::mask_drafts(std::span<const int32_t> drafts, const uint32_t* row0) {
  CHECK(!finished_, "mask_drafts() on a finished generation");
  draft_masks_.assign(1, std::span<const uint32_t>(row0, mask_width(row0)));
  const size_t width = mask_.size();
  draft_words_.resize(drafts.size() * width);
  // The grammar applies from the start, or from the row after the one picking </think>.
  bool grammar_on = !grammar_after_;
  std::optional<grammar::Matcher::Checkpoint> back;
  if (matcher_) back = matcher_->checkpoint();
  size_t kept = 0;
  for (; kept < drafts.size(); ++kept) {
    const int32_t d = drafts[kept];
    const std::span<const uint32_t> m = draft_masks_[kept];
    if (std::find(eos_.begin(), eos_.end(), d) != eos_.end()) break;
    if (!m.empty() && (size_t(d) / 32 >= m.size() || !((m[size_t(d) / 32] >> (d % 32)) & 1u))) break;
    // The row after the draft: the grammar's state once the draft is picked, and min_tokens' count.
    if (matcher_ && grammar_on && !matcher_->advance(d)) break;
    if (!grammar_on && d == *grammar_after_) grammar_on = true;
    // A drafted row's mask is optional (the draft just ends before it), so it may take a sixteenth of
    // a needed mask's parser work (~15 ms): a schema near the limit does not stall the engine loop k
    // times a step for rows a rejection may throw away.
    int allowed = 0;
    const std::span<const uint32_t> next =
        pick_mask(std::span<uint32_t>(draft_words_.data() + kept * width, width), usage_.completion_tokens + int64_t(kept) + 1,
                  grammar_on, grammar::Matcher::kMaskWork / 16, allowed);
    if (allowed <= 0) break;
    draft_masks_.push_back(next);
  }
  if (back) matcher_->restore(std::move(*back));
  return int(kept);
}

SamplingKnobs Generation::knobs(int64_t pos, int history) const {
  SamplingKnobs k = knobs_;
  k.counter = uint64_t(pos);
  k.history = adjusts() ? history : -1;
  return k;
}

bool Generation::adjusts() const {
  SamplingKnobs k = knobs_;
  k.history = 0;
  return k.adjusts();
}

std::optional<int32_t> Generation::step(int32_t picked, const float* logits, int vocab) {
  CHECK(!finished_, "step() on a finished generation");
  CHECK(logits || !needs_logits(), "logprobs need the logits of the row the engine picked from");
  if (sink_->cancelled()) {
    finished_ = true;
    std::fprintf(stderr, "[serve] request %llu: %lld prompt + %lld completion tokens, cancelled (client gone)\n",
                 (unsigned long long)id_, (long long)usage_.prompt_tokens, (long long)usage_.completion_tokens);
    return std::nullopt;
  }
  if (sink_->stop_requested(choice_)) return finish(FinishReason::kStop);
  // A forced sequence that runs out ends the turn as eos would.
  if (forced_ && forced_next_ == forced_->size()) return finish(FinishReason::kStop);
  int32_t next = picked;
  if (forced_) {
    next = (*forced_)[forced_next_++];
    if (next >= vocab) rocket::fail("forced token {} is outside the engine's vocabulary [0, {})", next, vocab);
  }
  if (reasoning_close_) {
    if (next != *reasoning_close_ && reasoning_left_-- <= 0) next = *reasoning_close_;  // the budget is spent
    if (next == *reasoning_close_) reasoning_close_.reset();
  }
  if (matcher_ && !grammar_after_ && !matcher_->advance(next)) {
    fail(fmt::format("structured output: token {} does not continue the response format after {} bytes of output",
                     next, matcher_->position()));
    return std::nullopt;
  }
  if (grammar_after_ && next == *grammar_after_) grammar_after_.reset();  // the answer starts next
  // Eos ends the output, but under ignore_eos or before min_tokens it is a token without text (what
  // vLLM's detokenizer makes of it), unless a structured output's grammar has just ended with it.
  const bool eos = std::find(eos_.begin(), eos_.end(), next) != eos_.end();
  if (eos && ((!ignore_eos_ && usage_.completion_tokens >= min_tokens_) || (matcher_ && !grammar_after_)))
    return finish(FinishReason::kStop);
  ++usage_.completion_tokens;
  const std::string piece = eos ? std::string() : decoder_.push(next);
  if (top_logprobs_ >= 0) {
    const RowLogprobs row = row_logprobs(logits, vocab, next, top_logprobs_);
    Scored s{TokenLogprob{std::string(tokenizer_.token_bytes(next)), row.logprob, {}}, decoded_, decoded_ + piece.size()};
    for (const TokenScore& t : row.top) s.logprob.top.emplace_back(std::string(tokenizer_.token_bytes(t.token)), t.logprob);
    scored_.push_back(std::move(s));
  }
  decoded_ += piece.size();
  if (!piece.empty() && usage_.completion_tokens <= min_tokens_) {
    emit(piece, /*stopped=*/false);  // no stop string ends the output before min_tokens
  } else if (!piece.empty()) {
    StopMatcher::Result res = stops_.push(piece);
    if (res.stopped) {
      emit(std::move(res.text), /*stopped=*/true);
      return finish(FinishReason::kStop);
    }
    if (!res.text.empty()) emit(std::move(res.text), /*stopped=*/false);
  }
  if (usage_.completion_tokens == max_tokens_) return finish(FinishReason::kLength);
  return next;
}

void Generation::budget_reasoning(int32_t close, int64_t budget) {
  CHECK(budget >= 0 && usage_.completion_tokens == 0, "a reasoning budget is set before the first step");
  reasoning_close_ = close;
  reasoning_left_ = budget;
}

std::optional<int32_t> Generation::finish(FinishReason reason) {
  finished_ = true;
  answered_ = true;
  if (!stops_.stopped()) {
    // The decoder's held bytes (an incomplete character) and the stop matcher's held tail are text
    // after all, unless the tail completes a stop string.
    std::string rest;
    const std::string tail = decoder_.flush();
    decoded_ += tail.size();
    if (!tail.empty()) {
      StopMatcher::Result res = stops_.push(tail);
      rest = std::move(res.text);
      if (res.stopped) reason = FinishReason::kStop;
    }
    if (!stops_.stopped()) rest += stops_.flush();
    // Everything is out now (or cut by a stop string): release every token that began before the end.
    emit(std::move(rest), /*stopped=*/true);
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::fprintf(stderr, "[serve] request %llu: %lld prompt + %lld completion tokens in %.2f s, %s\n",
               (unsigned long long)id_, (long long)usage_.prompt_tokens, (long long)usage_.completion_tokens, sec,
               std::string(finish_reason_name(reason)).c_str());
  finish_reason_ = reason;
  TokenEvent done;
  done.choice = choice_;
  done.done = true;
  done.finish = reason;
  if (stops_.stopped()) done.stop = stops_.matched();
  done.usage = usage_;
  sink_->push(std::move(done));
  return std::nullopt;
}

void Generation::emit(std::string text, bool stopped) {
  emitted_ += text.size();
  TokenEvent e;
  e.choice = choice_;
  e.text = std::move(text);
  while (!scored_.empty() && (scored_.front().end <= emitted_ || (stopped && scored_.front().begin < emitted_))) {
    e.logprobs.push_back(std::move(scored_.front().logprob));
    scored_.pop_front();
  }
  if (stopped) scored_.clear();
  if (e.text.empty() && e.logprobs.empty()) return;
  e.tokens = usage_.completion_tokens - tokens_pushed_;
  tokens_pushed_ = usage_.completion_tokens;
  sink_->push(std::move(e));
}

void Generation::fail(std::string_view message, int status) {
  CHECK(!finished_, "fail() on a finished generation");
  finished_ = true;
  answered_ = true;
  std::fprintf(stderr, "[serve] request %llu: failed in the engine: %.*s\n", (unsigned long long)id_,
               int(message.size()), message.data());
  TokenEvent e;
  e.choice = choice_;
  e.done = true;
  e.error = std::string(message);
  e.error_status = status;
  sink_->push(std::move(e));
}

}  // namespace rocket
