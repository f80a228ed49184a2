// The Scheduler under engine faults and drain, driven with a fault-injecting BatchEngine (a test
// double of the engine only; the scheduler, cache, prompt builder and generations are the real
// ones). A fault in the engine's batched work (prefill, decode, capture) ends the loop with every
// running and queued request answered and state() kFailed; a fault while admitting one request
// (restore_state, reset_state, bind_pages) fails that request alone while the others complete. After
// each, every page and snapshot is accounted for: free, cached by the prefix cache, or the padding
// page. drain() lets accepted requests finish, refuses new ones, and cuts off what is left at its
// deadline. Mixed steps (decode rows and prompt pieces in one prefill_batch call, where the plan's
// StepContract leaves room) give every request the tokens it gets alone. The double enforces the
// StepContract as the engines do (a call outside it is StepRefused, before any work), and a refused
// call fails only its streams.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "compiler/memory_map.h"
#include "fuel/chemistry.h"
#include "fuel/forge.h"
#include "openai/prompt_builder.h"
#include "openai/protocol_error.h"
#include "scheduler/batch_engine.h"
#include "scheduler/scheduler.h"

#include "scheduler_fixtures.h"
#include "test_paths.h"

namespace rocket {
namespace {

using namespace std::chrono_literals;

Plan tiny_plan() { return test::small_tiny_plan(); }

// Picks a token from the row's input and position (never an eos id), and throws from a chosen call.
class FaultyEngine : public BatchEngine {
 public:
  explicit FaultyEngine(Plan plan)
      : plan_(std::move(plan)), contract_(plan_), logits_(size_t(plan_.chemistry.vocab), 0.f) {}

  // The `nth` call (1-based) of `op` from now on throws: "prefill" (prefill and prefill_batch),
  // "decode", "capture_state", "restore_state", "reset_state", "bind_pages", "mixed" (a prefill_batch
  // with decode rows). Set before submitting. `refuse`: the fault is a StepRefused, as an engine
  // refuses a call outside the contract.

  void fail_at(const std::string& op, int nth, bool refuse = false) {
    std::lock_guard<std::mutex> lock(mu_);
    fault_op_ = op;
    fault_at_ = calls_[op] + nth;
    refuse_ = refuse;
  }
  void set_decode_delay(std::chrono::milliseconds d) { decode_delay_ = d; }
  // While held, every engine call waits: a test submits its batch of requests, then releases, so no
  // request is submitted after a fault has already ended the loop (submit would throw), however slowly
  // the test thread runs beside the loop's.
  void hold() {
    std::lock_guard<std::mutex> lock(gate_mu_);
    held_ = true;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(gate_mu_);
      held_ = false;
    }
    gate_cv_.notify_all();
  }
  // prefill_batch calls that led with decode rows and had prompt segments after them.
  int mixed_calls() const { return mixed_calls_.load(); }

  const Plan& plan() const override { return plan_; }
  const StepContract& contract() const override { return contract_; }
  int vocab() const override { return plan_.chemistry.vocab; }

  void prefill(int slot, const int32_t* ids, int n, int64_t pos0, const SamplingKnobs* knobs, bool want_logits,
               const PrefillCapture* capture) override {
    const PrefillSegment one{.slot = slot, .ids = ids, .n = n, .pos0 = pos0, .knobs = knobs, .want_logits = want_logits,
                             .capture = capture};
    contract_.check_prefill_batch({&one, 1}, 0);
    hit("prefill");
    if (knobs) decoding_.insert(slot);
    tokens_.assign(1, pick(ids[n - 1], pos0 + n - 1));
  }
  void prefill_batch(std::span<const PrefillSegment> segments, int d) override {
    contract_.check_prefill_batch(segments, d);
    hit("prefill");
    for (int i = 0; i < d; ++i)
      EXPECT_TRUE(decoding_.count(segments[size_t(i)].slot)) << "a decode row of a stream that has not picked a token";
    for (const PrefillSegment& g : segments)
      if (g.knobs) decoding_.insert(g.slot);
    if (d > 0 && d < int(segments.size())) {
      hit("mixed");
      ++mixed_calls_;
    }
    tokens_.clear();
    for (const PrefillSegment& s : segments) tokens_.push_back(pick(s.ids[s.n - 1], s.pos0 + s.n - 1));
  }
  void decode(int n, const int32_t* ids, const int* slots, const int64_t* pos, const SamplingKnobs*, bool) override {
    contract_.check_decode(n, ids, slots, pos);
    hit("decode");
    if (decode_delay_.count() > 0) std::this_thread::sleep_for(decode_delay_);
    tokens_.clear();
    for (int i = 0; i < n; ++i) tokens_.push_back(pick(ids[i], pos[i]));
  }
  const int32_t* tokens() const override { return tokens_.data(); }
  const float* logits(int) const override { return logits_.data(); }
  void reset_state(int slot) override {
    hit("reset_state");
    decoding_.erase(slot);
  }
  void bind_pages(int, std::span<const int>) override { hit("bind_pages"); }
  void copy_page(int, int, int) override { hit("copy_page"); }
  void bind_pad_page(int) override {}
  void capture_state(int, int) override { hit("capture_state"); }
  void restore_state(int, int slot) override {
    hit("restore_state");
    decoding_.erase(slot);
  }
  void time_steps(int, StepObserver) override {}
  void reset_history(int, std::span<const int32_t>, std::span<const LogitBias>) override { hit("reset_history"); }

 private:
  static int32_t pick(int32_t last, int64_t pos) { return int32_t(100 + (int64_t(last) * 31 + pos * 7) % 900); }

  void hit(const std::string& op) {
    {
      std::unique_lock<std::mutex> gate(gate_mu_);
      gate_cv_.wait(gate, [this] { return !held_; });
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (++calls_[op] != fault_at_ || op != fault_op_) return;
    if (refuse_) throw StepRefused("injected refusal of " + op);
    throw std::runtime_error("injected fault in " + op);
  }

  Plan plan_;
  StepContract contract_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
  std::mutex mu_;
  std::map<std::string, int> calls_;
  std::string fault_op_;
  int fault_at_ = -1;
  bool refuse_ = false;
  std::chrono::milliseconds decode_delay_{0};
  std::atomic<int> mixed_calls_{0};
  std::set<int> decoding_;  // slots that picked a token since their last reset or restore
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool held_ = false;
};

PromptBuilder prompts() { return test::qwen_prompts(); }
CompletionRequest request(int seed, int n, int max_tokens) { return test::token_request(seed, n, max_tokens); }
using test::Answer;
using test::wait_answer;

class SchedulerFaults : public ::testing::Test {
 protected:
  SchedulerFaults() : engine_(tiny_plan()) {}

  void start(SchedulerOptions o = {}) {
    o.on_failure = [this] { ++failures_; };
    scheduler_ = std::make_unique<Scheduler>(prompts(), engine_, ModelInfo{"tiny", {}}, o);
  }

  std::shared_ptr<RequestSink> submit(const CompletionRequest& r) {
    auto sink = std::make_shared<RequestSink>(int(r.n));
    scheduler_->submit(r, sink);
    return sink;
  }

  // Every page is free, cached, or the padding page; every snapshot free or cached: nothing leaked.
  // The loop publishes its counters at the end of the step that answered the last request.
  void expect_audit_exact(int refused_steps = 0) {
    nlohmann::ordered_json st;
    for (int i = 0; i < 200; ++i) {
      st = scheduler_->stats();
      if (st["active"] == 0 && st["waiting"] == 0) break;
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(st["active"], 0) << st.dump();
    ASSERT_EQ(st["waiting"], 0) << st.dump();
    EXPECT_EQ(st["pages_free"].get<int>() + st["pages_cached"].get<int>() + 1, st["pages"].get<int>()) << st.dump();
    EXPECT_EQ(st["snapshots_free"].get<int>() + st["snapshots_cached"].get<int>(), st["snapshots"].get<int>())
        << st.dump();
    EXPECT_EQ(st["refused_steps"].get<int>(), refused_steps) << st.dump();
  }

  int page() const { return engine_.plan().kv_page_tokens; }

  // An engine failure in a step: every running and queued request gets an error event naming it,
  // and then on_failure is called, once.
  void expect_engine_failure(const std::vector<std::shared_ptr<RequestSink>>& sinks, const std::string& op) {
    for (const auto& sink : sinks) {
      const Answer a = wait_answer(*sink);
      EXPECT_NE(a.last.error.find("injected fault in " + op), std::string::npos) << a.last.error;
    }
    for (int i = 0; i < 500 && failures_.load() == 0; ++i) std::this_thread::sleep_for(2ms);
    EXPECT_EQ(failures_.load(), 1);
  }

  // `victim` fails while admitted (the first `op` call from now on throws); `others`, submitted right
  // after it, complete as they did alone (`alone`, their texts).
  void expect_admission_fault_is_contained(const std::string& op, const CompletionRequest& victim,
                                           const std::vector<CompletionRequest>& others,
                                           const std::vector<std::string>& alone) {
    engine_.fail_at(op, 1);
    auto v = submit(victim);
    std::vector<std::shared_ptr<RequestSink>> sinks;
    for (const CompletionRequest& r : others) sinks.push_back(submit(r));
    const Answer a = wait_answer(*v);
    EXPECT_NE(a.last.error.find("admitting the request failed: injected fault in " + op), std::string::npos)
        << a.last.error;
    for (size_t i = 0; i < sinks.size(); ++i) {
      const Answer b = wait_answer(*sinks[i]);
      EXPECT_EQ(b.last.error, "") << op << ", request " << i;
      EXPECT_EQ(b.last.finish, FinishReason::kLength) << op << ", request " << i;
      EXPECT_EQ(b.text, alone[i]) << op << ", request " << i;
    }
  }

  FaultyEngine engine_;
  std::atomic<int> failures_{0};
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerFaults, DecodeFaultAnswersEveryRunningAndQueuedRequestAndEndsTheLoop) {
  engine_.set_decode_delay(2ms);  // the queue fills while the first streams run
  engine_.fail_at("decode", 3);
  start();
  const int streams = engine_.plan().max_streams;
  std::vector<std::shared_ptr<RequestSink>> sinks;
  engine_.hold();
  for (int i = 0; i < streams + 8; ++i) sinks.push_back(submit(request(i, 20 + i % 7, 50)));
  engine_.release();
  expect_engine_failure(sinks, "decode");
  const LoopState st = scheduler_->state();
  EXPECT_EQ(st.status, LoopState::Status::kFailed);
  EXPECT_NE(st.reason.find("injected fault in decode"), std::string::npos) << st.reason;
  try {
    submit(request(99, 10, 5));
    ADD_FAILURE() << "a failed loop accepted a request";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.code(), "engine_failed");
  }
  expect_audit_exact();
}

TEST_F(SchedulerFaults, PrefillFaultAnswersEveryRequestAndEndsTheLoop) {
  engine_.fail_at("prefill", 2);
  start();
  std::vector<std::shared_ptr<RequestSink>> sinks;
  // Long prompts: several prefill calls each, some pages captured before the fault.
  engine_.hold();
  for (int i = 0; i < 6; ++i) sinks.push_back(submit(request(i, 3 * page() + 5, 10)));
  engine_.release();
  expect_engine_failure(sinks, "prefill");
  EXPECT_EQ(scheduler_->state().status, LoopState::Status::kFailed);
  expect_audit_exact();
}

TEST_F(SchedulerFaults, CaptureFaultInAStepIsAnEngineFailure) {
  engine_.fail_at("capture_state", 1);
  start();
  std::vector<std::shared_ptr<RequestSink>> sinks;
  engine_.hold();
  for (int i = 0; i < 4; ++i) sinks.push_back(submit(request(i, 2 * page() + 3, 10)));
  engine_.release();
  expect_engine_failure(sinks, "capture_state");
  EXPECT_EQ(scheduler_->state().status, LoopState::Status::kFailed);
  expect_audit_exact();
}

TEST_F(SchedulerFaults, AdmissionFaultsFailOneRequestAndTheOthersContinue) {
  start();
  // References, each alone, and a cached prefix for the restore case below.
  const CompletionRequest cached = request(1, 2 * page() + 9, 12);
  std::vector<CompletionRequest> others;
  std::vector<std::string> alone;
  for (int i = 10; i < 14; ++i) others.push_back(request(i, page() + 3 * i, 16));
  for (const CompletionRequest& r : others) {
    const Answer a = wait_answer(*submit(r));
    ASSERT_EQ(a.last.error, "");
    alone.push_back(a.text);
  }
  const Answer first = wait_answer(*submit(cached));
  ASSERT_EQ(first.last.error, "");
  expect_audit_exact();

  // The cached prompt resumes from its snapshot: restore_state throws.
  expect_admission_fault_is_contained("restore_state", cached, others, alone);
  expect_audit_exact();
  // A fresh prompt: reset_state throws.
  expect_admission_fault_is_contained("reset_state", request(50, 40, 8), others, alone);
  expect_audit_exact();
  // Binding the page table throws.
  expect_admission_fault_is_contained("bind_pages", request(51, 40, 8), others, alone);
  expect_audit_exact();

  EXPECT_EQ(scheduler_->state().status, LoopState::Status::kServing);
  EXPECT_EQ(failures_.load(), 0);
  // The slot and the cache entry are usable again: the cached prompt resumes and answers as before.
  const Answer again = wait_answer(*submit(cached));
  EXPECT_EQ(again.last.error, "");
  EXPECT_EQ(again.text, first.text);
  EXPECT_GT(again.last.usage.cached_tokens, 0);
  expect_audit_exact();
}

TEST_F(SchedulerFaults, DrainFinishesAcceptedRequestsAndRefusesNewOnes) {
  engine_.set_decode_delay(1ms);
  start();
  std::vector<std::shared_ptr<RequestSink>> sinks;
  for (int i = 0; i < 6; ++i) sinks.push_back(submit(request(i, 30, 40)));
  std::thread drainer([&] { EXPECT_EQ(scheduler_->drain(std::chrono::steady_clock::now() + 20s), 0); });
  while (scheduler_->state().status != LoopState::Status::kDraining) std::this_thread::sleep_for(1ms);
  try {
    submit(request(99, 10, 5));
    ADD_FAILURE() << "a draining loop accepted a request";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.code(), "shutting_down");
  }
  drainer.join();
  for (auto& sink : sinks) {
    const Answer a = wait_answer(*sink);
    EXPECT_EQ(a.last.error, "");
    EXPECT_EQ(a.last.finish, FinishReason::kLength);
    EXPECT_EQ(a.last.usage.completion_tokens, 40);
  }
  expect_audit_exact();
}

TEST_F(SchedulerFaults, DrainCutsOffWhatIsLeftAtTheDeadline) {
  engine_.set_decode_delay(5ms);  // 1000 tokens: 5 s per stream, far past the deadline
  start();
  const int streams = engine_.plan().max_streams;
  std::vector<std::shared_ptr<RequestSink>> sinks;
  for (int i = 0; i < streams + 4; ++i) sinks.push_back(submit(request(i, 20, 1000)));
  std::this_thread::sleep_for(50ms);
  const auto t0 = std::chrono::steady_clock::now();
  const int cut = scheduler_->drain(t0 + 200ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(cut, streams + 4);
  for (auto& sink : sinks) {
    const Answer a = wait_answer(*sink);
    EXPECT_NE(a.last.error.find("aborted at the drain deadline"), std::string::npos) << a.last.error;
  }
  EXPECT_EQ(scheduler_->state().status, LoopState::Status::kDraining);
  expect_audit_exact();
}

}  // namespace
}  // namespace rocket

namespace rocket {
namespace {

// Requests running together, prompts arriving while others decode: the mixed steps must give every
// request the text it gets alone (the double picks from each row's token and position, so a decode
// row's pick read at a prompt's index, or a prompt's at a row's, changes text).
TEST_F(SchedulerFaults, MixedStepsGiveEveryRequestTheTokensItGetsAlone) {
  std::vector<CompletionRequest> requests;
  for (int i = 0; i < 12; ++i) requests.push_back(request(i, 5 * page() + 7 * i + 3, 30 + 5 * (i % 4)));
  start();
  std::vector<std::string> alone;
  for (const CompletionRequest& r : requests) alone.push_back(wait_answer(*submit(r)).text);
  EXPECT_EQ(scheduler_->stats()["mixed_steps"].get<int>(), 0);
  std::vector<std::shared_ptr<RequestSink>> sinks;
  for (const CompletionRequest& r : requests) sinks.push_back(submit(r));
  for (size_t i = 0; i < sinks.size(); ++i) {
    const Answer a = wait_answer(*sinks[i]);
    EXPECT_EQ(a.last.error, "");
    EXPECT_EQ(a.last.finish, FinishReason::kLength);
    EXPECT_EQ(a.text, alone[i]) << "request " << i;
  }
  expect_audit_exact();
  const int steps = scheduler_->stats()["mixed_steps"].get<int>();
  EXPECT_GT(steps, 0);
  EXPECT_EQ(engine_.mixed_calls(), steps);
}

// The load that took the GPU server down (issue 38): every slot filled with cold prompts at once,
// prompts sharing prefixes, n > 1 forks that resume with one-token tails, decoding streams beside long
// prompts, clients hanging up. Every call stays inside the contract (the double refuses any other),
// and every request is answered.
TEST_F(SchedulerFaults, AgentLoadStaysInsideTheContract) {
  start();
  const int slots = engine_.plan().max_streams;
  std::vector<std::shared_ptr<RequestSink>> sinks, gone;
  std::vector<int> choices;
  for (int i = 0; i < 6 * slots; ++i) {
    CompletionRequest r = request(i % 5, 3 * page() + (i * 37) % (2 * page()) + 1, 4 + i % 9);
    if (i % 4 == 1) r.n = 1 + i % 3;  // forks resume through the cache, often with a one-token tail
    if (i % 6 == 5) r.max_tokens = 300;  // long decoders beside the prompts
    auto sink = submit(r);
    if (i % 7 == 3) {
      gone.push_back(sink);
    } else {
      sinks.push_back(sink);
      choices.push_back(int(r.n));
    }
  }
  for (const auto& g : gone) g->cancel();
  for (size_t i = 0; i < sinks.size(); ++i) {
    const Answer a = wait_answer(*sinks[i], choices[i]);
    EXPECT_EQ(a.last.error, "") << "request " << i;
  }
  expect_audit_exact();
  EXPECT_GT(scheduler_->stats()["mixed_steps"].get<int>(), 0);
}

TEST_F(SchedulerFaults, AFaultInAMixedStepAnswersEveryRequestAndEndsTheLoop) {
  engine_.set_decode_delay(2ms);
  engine_.fail_at("mixed", 2);
  start();
  std::vector<std::shared_ptr<RequestSink>> sinks;
  sinks.push_back(submit(request(0, 5, 400)));  // decoding while the others prefill
  for (int i = 0; i < 200 && scheduler_->stats()["decode_rows"].get<int>() == 0; ++i) std::this_thread::sleep_for(5ms);
  engine_.hold();
  for (int i = 1; i < 5; ++i) sinks.push_back(submit(request(i, 4 * page() + i, 10)));
  engine_.release();
  expect_engine_failure(sinks, "mixed");
  EXPECT_EQ(engine_.mixed_calls(), 1);
  EXPECT_EQ(scheduler_->state().status, LoopState::Status::kFailed);
  expect_audit_exact();
}

// A call the engine refuses (StepRefused) fails the streams in it; the loop and the other requests go on.
TEST_F(SchedulerFaults, ARefusedStepFailsItsStreamsAndServingGoesOn) {
  engine_.set_decode_delay(2ms);
  engine_.fail_at("mixed", 1, /*refuse=*/true);
  start();
  auto first = submit(request(0, 5, 400));  // decoding while the next one prefills: a mixed step
  for (int i = 0; i < 200 && scheduler_->stats()["decode_rows"].get<int>() == 0; ++i) std::this_thread::sleep_for(5ms);
  auto second = submit(request(1, 2 * page() + 3, 10));
  for (const auto& sink : {first, second}) {
    const Answer a = wait_answer(*sink);
    EXPECT_NE(a.last.error.find("the engine refused the step: injected refusal of mixed"), std::string::npos) << a.last.error;
  }
  const std::string alone_text = [&] {
    auto s = submit(request(2, page() + 5, 12));
    const Answer a = wait_answer(*s);
    EXPECT_EQ(a.last.error, "");
    return a.text;
  }();
  EXPECT_FALSE(alone_text.empty());
  EXPECT_EQ(scheduler_->state().status, LoopState::Status::kServing);
  EXPECT_EQ(failures_.load(), 0);
  expect_audit_exact(/*refused_steps=*/1);
}

}  // namespace
}  // namespace rocket
