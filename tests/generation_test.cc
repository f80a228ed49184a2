// Generation: a stop requested through the RequestSink (parallel_tool_calls=false has its call) ends
// the request at its next token as a stop string would: no further token, the final event with usage.
// A token the engine picked with sampling_row's knobs steps the request exactly as sampling the same
// logits on the host does (text, logprobs, usage), and a forced sequence overrides the engine's pick.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/host/sample.h"
#include "openai/openai_request.h"
#include "scheduler/generation.h"

#include "qwen_fixtures.h"

namespace rocket {
namespace {

using test::qwen;

// A row of logits whose argmax is `id`, the rest spread so that no two are equal.
std::vector<float> logits_for(int32_t id) {
  std::vector<float> row(size_t(qwen().vocab_size()));
  for (size_t i = 0; i < row.size(); ++i) row[i] = -1.0f - float(i % 97) * 0.01f;
  row[size_t(id)] = 5.0f;
  return row;
}

std::vector<TokenEvent> drain(RequestSink& sink) {
  std::vector<TokenEvent> events;
  while (std::optional<TokenEvent> e = sink.pop(std::chrono::milliseconds(0))) events.push_back(std::move(*e));
  return events;
}

TEST(Generation, StopRequestEndsTheRequestAtItsNextToken) {
  CompletionRequest r;
  r.temperature = 0;  // greedy: the argmax of each row
  const std::vector<int32_t> prompt = qwen().encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> out = qwen().encode(" Hello there, friend");
  ASSERT_GE(out.size(), 3u);
  const std::vector<int32_t> eos;
  auto sink = std::make_shared<RequestSink>();
  Generation g(1, r, prompt, /*max_tokens=*/100, qwen(), eos, sink, /*forced=*/nullptr);

  int64_t pos = int64_t(prompt.size());
  EXPECT_EQ(g.step(logits_for(out[0]).data(), qwen().vocab_size(), pos++), out[0]);
  EXPECT_EQ(g.step(logits_for(out[1]).data(), qwen().vocab_size(), pos++), out[1]);
  sink->request_stop();
  EXPECT_EQ(g.step(logits_for(out[2]).data(), qwen().vocab_size(), pos++), std::nullopt);
  EXPECT_TRUE(g.finished());
  EXPECT_TRUE(g.answered());

  const std::vector<TokenEvent> events = drain(*sink);
  ASSERT_FALSE(events.empty());
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_FALSE(events[i].done);
    text += events[i].text;
  }
  EXPECT_EQ(text, qwen().decode(std::vector<int32_t>(out.begin(), out.begin() + 2)));
  const TokenEvent& done = events.back();
  EXPECT_TRUE(done.done);
  EXPECT_TRUE(done.error.empty());
  EXPECT_EQ(done.finish, FinishReason::kStop);
  EXPECT_EQ(done.usage.prompt_tokens, int64_t(prompt.size()));
  EXPECT_EQ(done.usage.completion_tokens, 2);
}

// What a test compares of two generations' outputs: every event's text and logprobs, then the end.
struct Output {
  std::string text;
  std::vector<std::string> tokens;
  std::vector<double> logprobs;
  std::vector<std::vector<std::pair<std::string, double>>> top;
  FinishReason finish = FinishReason::kStop;
  int64_t completion_tokens = -1;
};

Output collect(RequestSink& sink) {
  Output out;
  for (const TokenEvent& e : drain(sink)) {
    out.text += e.text;
    for (const TokenLogprob& t : e.logprobs) {
      out.tokens.push_back(t.bytes);
      out.logprobs.push_back(t.logprob);
      out.top.push_back(t.top);
    }
    if (e.done) {
      out.finish = e.finish;
      out.completion_tokens = e.usage.completion_tokens;
    }
  }
  return out;
}

TEST(Generation, PickedTokenStepsAsHostSamplingOfTheSameLogits) {
  CompletionRequest r;
  r.temperature = 0.9;
  r.top_p = 0.95;
  r.top_k = 200;
  r.seed = 1234;
  r.logprobs = true;
  r.top_logprobs = 3;
  const std::vector<int32_t> prompt = qwen().encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> eos;
  constexpr int kTokens = 12;
  auto host_sink = std::make_shared<RequestSink>(), picked_sink = std::make_shared<RequestSink>();
  Generation host(1, r, prompt, kTokens, qwen(), eos, host_sink, /*forced=*/nullptr);
  Generation picked(2, r, prompt, kTokens, qwen(), eos, picked_sink, /*forced=*/nullptr);
  EXPECT_TRUE(picked.needs_logits());

  // Flat random rows: many tokens are in reach of every draw, so a wrong seed, counter or knob in
  // sampling_row picks a different token.
  const int V = qwen().vocab_size();
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  std::vector<float> row(static_cast<size_t>(V)), scratch(static_cast<size_t>(V));
  std::vector<int32_t> scratch_idx(static_cast<size_t>(V));
  int64_t pos = int64_t(prompt.size());
  for (int i = 0; i < kTokens; ++i, ++pos) {
    for (float& x : row) x = noise(rng);
    const RowSampling k = picked.sampling_row(pos);
    const int32_t engine_pick = host::sample(row.data(), V, {k.temperature, k.top_p, k.top_k, k.seed}, k.counter,
                                             scratch.data(), scratch_idx.data());
    const std::optional<int32_t> a = host.step(row.data(), V, pos);
    const std::optional<int32_t> b = picked.step_picked(engine_pick, row.data(), V);
    ASSERT_EQ(a, b) << "step " << i;
  }
  EXPECT_TRUE(host.finished());
  EXPECT_TRUE(picked.finished());

  const Output want = collect(*host_sink), got = collect(*picked_sink);
  EXPECT_FALSE(want.text.empty());
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.logprobs, want.logprobs);
  EXPECT_EQ(got.top, want.top);
  EXPECT_EQ(got.finish, FinishReason::kLength);
  EXPECT_EQ(got.completion_tokens, int64_t(kTokens));
  EXPECT_EQ(got.completion_tokens, want.completion_tokens);
}

TEST(Generation, ForcedTokensOverrideTheEnginesPick) {
  const std::string path = ::testing::TempDir() + "generation_forced_" + std::to_string(getpid()) + ".json";
  const std::vector<int32_t> seq = {9707, 11, 1879};
  std::ofstream(path) << R"({"forced": [9707, 11, 1879]})";
  const ForcedTokens forced = ForcedTokens::load(path);
  std::remove(path.c_str());

  CompletionRequest r;
  r.user = "forced";
  const std::vector<int32_t> prompt = qwen().encode("Hi");
  const std::vector<int32_t> eos;
  auto sink = std::make_shared<RequestSink>();
  Generation g(1, r, prompt, /*max_tokens=*/100, qwen(), eos, sink, &forced);
  const int32_t engine_pick = 42;  // in none of the forced sequence
  for (int32_t want : seq) EXPECT_EQ(g.step_picked(engine_pick, nullptr, qwen().vocab_size()), want);
  EXPECT_EQ(g.step_picked(engine_pick, nullptr, qwen().vocab_size()), std::nullopt);  // the sequence ran out

  const Output out = collect(*sink);
  EXPECT_EQ(out.text, qwen().decode(seq));
  EXPECT_EQ(out.finish, FinishReason::kStop);
  EXPECT_EQ(out.completion_tokens, int64_t(seq.size()));
}

}  // namespace
}  // namespace rocket
