// The Scheduler's speculative steps (docs/speculative.md), driven with a drafting BatchEngine double
// (a test double of the engine only; the scheduler, cache, prompt builder and generations are the
// real ones). The double picks each row's token from its input and position, drafts that very
// continuation with every third token made wrong, and checks every call: the contract, each row's
// knobs keyed by its position, and that each stream's next call starts where its last verify left
// it. Streams that draft give every request the text a plain engine gives it (lengths ending inside a
// step, prompts at the end of the context, shared prefixes resumed from the cache), with drafts
// accepted and rejected; `speculative: false` keeps a request off it; under a grammar or min_tokens
// each verified row picks under its own mask (the double picks the first allowed token from its
// unmasked pick on, and drafts unmasked, so masks refuse drafts too); every page and snapshot is
// accounted for afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "compiler/memory_map.h"
#include "fuel/chemistry.h"
#include "fuel/forge.h"
#include "openai/prompt_builder.h"
#include "scheduler/batch_engine.h"
#include "scheduler/scheduler.h"

#include "scheduler_fixtures.h"
#include "test_paths.h"

namespace rocket {
namespace {

using namespace std::chrono_literals;

// The tiny chemistry with its MTP layer, in the small regime of scheduler_faults_test, drafting
// `draft` tokens (0: a plain plan).
Plan tiny_plan(int draft) { return test::small_tiny_plan(1024, draft); }

class DraftingEngine : public BatchEngine {
 public:
  explicit DraftingEngine(Plan plan)
      : plan_(std::move(plan)), contract_(plan_), logits_(size_t(plan_.chemistry.vocab), 0.f) {}

  const Plan& plan() const override { return plan_; }
  const StepContract& contract() const override { return contract_; }
  int vocab() const override { return plan_.chemistry.vocab; }
  int draft_tokens() const override { return plan_.draft_tokens; }

  void prefill(int slot, const int32_t* ids, int n, int64_t pos0, const SamplingKnobs* knobs, bool want_logits,
               const PrefillCapture* capture) override {
    const PrefillSegment one{.slot = slot, .ids = ids, .n = n, .pos0 = pos0, .knobs = knobs, .want_logits = want_logits,
                             .capture = capture};
    prefill_batch({&one, 1}, 0);
  }
  void prefill_batch(std::span<const PrefillSegment> segments, int d) override {
    contract_.check_prefill_batch(segments, d);
    tokens_.clear();
    for (int i = 0; i < int(segments.size()); ++i) {
      const PrefillSegment& g = segments[size_t(i)];
      if (i < d) expect_next(g.slot, g.pos0, g.ids[0]);
      tokens_.push_back(masked(pick(g.ids[g.n - 1], g.pos0 + g.n - 1), mask(i)));
      if (g.knobs) next_[g.slot] = {g.pos0 + g.n, tokens_.back()};
    }
    masks_.clear();
  }
  void decode(int n, const int32_t* ids, const int* slots, const int64_t* pos, const SamplingKnobs*, bool) override {
    contract_.check_decode(n, ids, slots, pos);
    tokens_.clear();
    for (int i = 0; i < n; ++i) {
      expect_next(slots[i], pos[i], ids[i]);
      tokens_.push_back(masked(pick(ids[i], pos[i]), mask(i)));
      next_[slots[i]] = {pos[i] + 1, tokens_.back()};
    }
    masks_.clear();
  }
  // The continuation plain decoding would pick, every third token (by position) wrong.
  void draft(int slot, int32_t token, int64_t pos, int k, int32_t* drafts) override {
    contract_.check_speculative("draft", slot, &token, 1, k, pos);
    expect_next(slot, pos, token);
    int32_t t = token;
    for (int i = 0; i < k; ++i) {
      t = pick(t, pos + i);
      if ((pos + i) % 3 == 0) t = t == 999 ? 100 : t + 1;
      drafts[i] = t;
    }
    ++drafts_;
  }
  int verify(int slot, const int32_t* ids, int k, int64_t pos, const SamplingKnobs* knobs) override {
    contract_.check_speculative("verify", slot, ids, k + 1, k, pos);
    expect_next(slot, pos, ids[0]);
    tokens_.clear();
    int a = 0;
    for (;; ++a) {
      EXPECT_EQ(knobs[a].counter, uint64_t(pos + 1 + a)) << "row " << a << " drawn with another position's knobs";
      tokens_.push_back(masked(pick(ids[a], pos + a), mask(a)));
      if (a == k || tokens_.back() != ids[a + 1]) break;
    }
    masked_verifies_ += !masks_.empty();
    masks_.clear();
    next_[slot] = {pos + a + 1, tokens_.back()};
    accepted_ = a;
    ++verifies_;
    return a;
  }
  void capture_verified(int row, int) override {
    EXPECT_GE(row, 0);
    EXPECT_LE(row, accepted_) << "a snapshot of a row the step did not accept";
  }
  bool masks_picks() const override { return true; }
  void mask_next_picks(std::span<const uint32_t* const> masks) override { masks_.assign(masks.begin(), masks.end()); }
  const int32_t* tokens() const override { return tokens_.data(); }
  const float* logits(int) const override { return logits_.data(); }
  void reset_state(int slot) override { next_.erase(slot); }
  void bind_pages(int, std::span<const int>) override {}
  void copy_page(int, int, int) override {}
  void bind_pad_page(int) override {}
  void capture_state(int, int) override {}
  void restore_state(int, int slot) override { next_.erase(slot); }
  void time_steps(int, StepObserver) override {}
  void reset_history(int, std::span<const int32_t>, std::span<const LogitBias>) override {}

  int verifies() const { return verifies_; }
  int masked_verifies() const { return masked_verifies_; }

 private:
  static int32_t pick(int32_t last, int64_t pos) { return int32_t(100 + (int64_t(last) * 31 + pos * 7) % 900); }
  const uint32_t* mask(int row) const { return size_t(row) < masks_.size() ? masks_[size_t(row)] : nullptr; }
  // The first token the mask allows from `t` on (cyclically): a masked pick.
  int32_t masked(int32_t t, const uint32_t* m) const {
    if (!m) return t;
    const int32_t V = plan_.chemistry.vocab;
    for (int32_t i = 0; i < V; ++i) {
      const int32_t c = (t + i) % V;
      if ((m[c / 32] >> (c % 32)) & 1u) return c;
    }
    ADD_FAILURE() << "a mask that allows no token";
    return t;
  }
  // A decoding stream's next call feeds the token its last call picked, at the position after it.
  void expect_next(int slot, int64_t pos, int32_t token) {
    const auto it = next_.find(slot);
    ASSERT_NE(it, next_.end()) << "slot " << slot << " decodes without having picked a token";
    EXPECT_EQ(it->second.first, pos) << "slot " << slot;
    EXPECT_EQ(it->second.second, token) << "slot " << slot;
  }

  Plan plan_;
  StepContract contract_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
  std::vector<const uint32_t*> masks_;  // mask_next_picks(): the next call's rows
  std::map<int, std::pair<int64_t, int32_t>> next_;  // slot -> the position and token it feeds next
  int accepted_ = -1, drafts_ = 0, verifies_ = 0, masked_verifies_ = 0;
};

using test::Answer;
using test::wait_answer;
CompletionRequest request(int seed, int n, int max_tokens) { return test::token_request(seed, n, max_tokens); }

// Every request's answer on one engine, submitted together.
std::vector<Answer> serve(BatchEngine& engine, const std::vector<CompletionRequest>& requests, nlohmann::ordered_json* stats) {
  Scheduler scheduler(test::qwen_prompts(), engine, ModelInfo{"tiny", {}});
  std::vector<std::shared_ptr<RequestSink>> sinks;
  for (const CompletionRequest& r : requests) {
    sinks.push_back(std::make_shared<RequestSink>(int(r.n)));
    scheduler.submit(r, sinks.back());
  }
  std::vector<Answer> answers;
  for (const auto& s : sinks) answers.push_back(wait_answer(*s));
  for (int i = 0; i < 200; ++i) {
    *stats = scheduler.stats();
    if ((*stats)["active"] == 0 && (*stats)["waiting"] == 0) break;
    std::this_thread::sleep_for(10ms);
  }
  return answers;
}

// `requests` served by a plain engine and by one drafting `draft` tokens: every request answered
// without error, and with the same text, finish and length by both.
struct Served {
  nlohmann::ordered_json plain, spec;  // the schedulers' stats
  int verifies = 0, masked_verifies = 0;
};
Served serve_both(const std::vector<CompletionRequest>& requests, int draft) {
  Served out;
  DraftingEngine plain_engine(tiny_plan(0)), spec_engine(tiny_plan(draft));
  const std::vector<Answer> plain = serve(plain_engine, requests, &out.plain);
  const std::vector<Answer> spec = serve(spec_engine, requests, &out.spec);
  EXPECT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size() && i < spec.size(); ++i) {
    EXPECT_EQ(plain[i].last.error, "") << "request " << i << ": " << plain[i].text;
    EXPECT_EQ(spec[i].last.error, "") << "request " << i;
    EXPECT_EQ(spec[i].text, plain[i].text) << "request " << i;
    EXPECT_EQ(spec[i].last.finish, plain[i].last.finish) << "request " << i;
    EXPECT_EQ(spec[i].last.usage.completion_tokens, plain[i].last.usage.completion_tokens) << "request " << i;
  }
  out.verifies = spec_engine.verifies();
  out.masked_verifies = spec_engine.masked_verifies();
  return out;
}

void expect_audit_exact(const nlohmann::ordered_json& st) {
  ASSERT_EQ(st["active"], 0) << st.dump();
  EXPECT_EQ(st["pages_free"].get<int>() + st["pages_cached"].get<int>() + 1, st["pages"].get<int>()) << st.dump();
  EXPECT_EQ(st["snapshots_free"].get<int>() + st["snapshots_cached"].get<int>(), st["snapshots"].get<int>()) << st.dump();
  EXPECT_EQ(st["refused_steps"].get<int>(), 0) << st.dump();
}

TEST(SchedulerSpeculative, DraftingStreamsGivePlainDecodingsText) {
  const Plan drafting = tiny_plan(3);
  const int page = drafting.kv_page_tokens;
  std::vector<CompletionRequest> requests;
  for (int i = 0; i < 20; ++i) requests.push_back(request(i % 6, page + (i * 29) % (2 * page) + 1, 1 + (i * 7) % 40));
  // Prompts near the end of the context: drafts shrink to the positions left.
  requests.push_back(request(40, drafting.max_context - 12, 11));
  requests.push_back(request(41, drafting.max_context - 3, 2));
  const Served both = serve_both(requests, 3);
  const nlohmann::ordered_json &plain_stats = both.plain, &spec_stats = both.spec;
  EXPECT_EQ(plain_stats["verify_steps"], 0);
  const int64_t drafted = spec_stats["drafted_tokens"], accepted = spec_stats["accepted_tokens"];
  EXPECT_EQ(spec_stats["verify_steps"].get<int>(), both.verifies);
  EXPECT_GT(accepted, 0) << spec_stats.dump();
  EXPECT_LT(accepted, drafted) << spec_stats.dump();
  EXPECT_EQ(spec_stats["generated_tokens"], plain_stats["generated_tokens"]);
  // Every accepted draft is a step its stream did not take. The schedulers' total step counts are not
  // compared: they follow the slowest stream and when each request was admitted (the test submits
  // while the scheduler already steps), which a loaded machine changes (69 against 69 seen in CI).
  expect_audit_exact(plain_stats);
  expect_audit_exact(spec_stats);
}

// Structured outputs (JSON schemas) and min_tokens: each verified row is masked as
// its decode step would be, so drafting gives plain decoding's text, drafts are verified under the
// masks and some accepted, and a draft a mask refuses ends the draft there.
TEST(SchedulerSpeculative, MasksApplyToEveryVerifiedRow) {
  std::vector<CompletionRequest> requests;
  for (int i = 0; i < 6; ++i) {
    requests.push_back(request(50 + i, 20 + 7 * i, 24 + 9 * i));
    CompletionRequest& r = requests.back();
    if (i % 3 == 0) {
      r.response_format.kind = ResponseFormat::Kind::kJsonSchema;
      r.response_format.schema = nlohmann::ordered_json::parse(
          R"({"type": "object", "properties": {"title": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["title", "n"], "additionalProperties": false})");
    } else if (i % 3 == 1) {  // (not json_object: the fixture's tokenizer has no eos to end a complete one)
      r.response_format.kind = ResponseFormat::Kind::kJsonSchema;
      r.response_format.schema = nlohmann::ordered_json::parse(
          R"({"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}, "minItems": 40})");
    } else {
      r.min_tokens = *r.max_tokens - 3;
    }
  }
  const Served both = serve_both(requests, 3);
  const nlohmann::ordered_json &plain_stats = both.plain, &spec_stats = both.spec;
  EXPECT_GT(both.masked_verifies, 0) << spec_stats.dump();
  EXPECT_GT(spec_stats["accepted_tokens"].get<int>(), 0) << spec_stats.dump();  // steps saved (see above)
  expect_audit_exact(plain_stats);
  expect_audit_exact(spec_stats);
}

TEST(SchedulerSpeculative, RequestsCanTurnItOff) {
  DraftingEngine engine(tiny_plan(3));
  std::vector<CompletionRequest> requests;
  for (int i = 0; i < 4; ++i) {
    requests.push_back(request(i, 40 + i, 30));
    requests.back().speculative = false;
  }
  nlohmann::ordered_json stats;
  for (const Answer& a : serve(engine, requests, &stats)) EXPECT_EQ(a.last.error, "");
  EXPECT_EQ(stats["verify_steps"], 0) << stats.dump();
  EXPECT_EQ(engine.verifies(), 0);
  expect_audit_exact(stats);
}

}  // namespace
}  // namespace rocket
