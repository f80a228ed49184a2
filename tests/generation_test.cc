// Generation: a stop requested through the RequestSink (parallel_tool_calls=false has its call) ends
// the request at its next token as a stop string would: no further token, the final event with usage.
// Its knobs are the request's, the draw keyed by position, so a seeded request draws the same tokens
// in any generation; the engine's pick steps the request (text, logprobs of the row it was picked
// from, usage), and a forced sequence overrides the engine's pick.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_schema.h"
#include "kernels/host/sample.h"
#include "openai/logprobs.h"
#include "openai/openai_request.h"
#include "scheduler/generation.h"

#include "qwen_fixtures.h"

namespace rocket {
namespace {

using test::qwen;

std::vector<TokenEvent> drain(RequestSink& sink) {
  std::vector<TokenEvent> events;
  while (std::optional<TokenEvent> e = sink.pop(std::chrono::milliseconds(0))) events.push_back(std::move(*e));
  return events;
}

TEST(Generation, StopRequestEndsTheRequestAtItsNextToken) {
  CompletionRequest r;
  r.temperature = 0;  // greedy
  const std::vector<int32_t> prompt = qwen().encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> out = qwen().encode(" Hello there, friend");
  ASSERT_GE(out.size(), 3u);
  const std::vector<int32_t> eos;
  auto sink = std::make_shared<RequestSink>();
  Generation g(1, r, prompt, /*max_tokens=*/100, qwen(), eos, sink, /*forced=*/nullptr);

  EXPECT_EQ(g.step(out[0], nullptr, qwen().vocab_size()), out[0]);
  EXPECT_EQ(g.step(out[1], nullptr, qwen().vocab_size()), out[1]);
  sink->request_stop();
  EXPECT_EQ(g.step(out[2], nullptr, qwen().vocab_size()), std::nullopt);
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

TEST(Generation, KnobsAreTheRequestsKeyedByPosition) {
  CompletionRequest r;
  r.temperature = 0.9;
  r.top_p = 0.95;
  r.top_k = 200;
  r.seed = 1234;
  const std::vector<int32_t> prompt = qwen().encode("Hi");
  const std::vector<int32_t> eos;
  Generation a(1, r, prompt, 8, qwen(), eos, std::make_shared<RequestSink>(), /*forced=*/nullptr);
  Generation b(2, r, prompt, 8, qwen(), eos, std::make_shared<RequestSink>(), /*forced=*/nullptr);
  for (int64_t pos : {int64_t(0), int64_t(prompt.size()), int64_t(4095)}) {
    const SamplingKnobs k = a.knobs(pos);
    EXPECT_EQ(k.temperature, 0.9f);
    EXPECT_EQ(k.top_p, 0.95f);
    EXPECT_EQ(k.top_k, 200);
    EXPECT_EQ(k.seed, 1234u);
    EXPECT_EQ(k.counter, uint64_t(pos));
    EXPECT_EQ(k.pad[0] | k.pad[1], 0u);
    EXPECT_EQ(k.masked, 0);  // the engine marks a masked row when it stages the step
    EXPECT_EQ(k.history, -1);  // no penalty or bias: the row reads no history
    // A seeded request draws the same way in any generation: a retry, another slot, another engine.
    const SamplingKnobs again = b.knobs(pos);
    EXPECT_EQ(std::memcmp(&k, &again, sizeof k), 0);
  }
  r.top_k = -1;  // vLLM's spelling of "off"
  r.seed.reset();
  Generation c(3, r, prompt, 8, qwen(), eos, std::make_shared<RequestSink>(), /*forced=*/nullptr);
  Generation d(4, r, prompt, 8, qwen(), eos, std::make_shared<RequestSink>(), /*forced=*/nullptr);
  EXPECT_EQ(c.knobs(0).top_k, 0);
  EXPECT_NE(c.knobs(0).seed, d.knobs(0).seed);  // unseeded requests draw independently
}

TEST(Generation, ChoicesDrawWithSeedPlusIndexAndPenaltiesNameTheirHistory) {
  CompletionRequest r;
  r.seed = 1234;
  r.n = 3;
  const std::vector<int32_t> prompt = qwen().encode("Hi");
  const std::vector<int32_t> eos;
  for (int c = 0; c < 3; ++c) {
    Generation g(1, r, prompt, 8, qwen(), eos, std::make_shared<RequestSink>(3), /*forced=*/nullptr, c);
    EXPECT_EQ(g.knobs(5).seed, 1234u + uint64_t(c));
    EXPECT_EQ(g.choice(), c);
    EXPECT_FALSE(g.adjusts());
    EXPECT_EQ(g.knobs(5, 2).history, -1);
  }
  r.presence_penalty = 0.5;
  r.logit_bias = {{.token = 7, .bias = -100.0f}};
  Generation g(1, r, prompt, 8, qwen(), eos, std::make_shared<RequestSink>(3), /*forced=*/nullptr, 0);
  EXPECT_TRUE(g.adjusts());
  const SamplingKnobs k = g.knobs(5, 2);
  EXPECT_EQ(k.history, 2);
  EXPECT_EQ(k.presence_penalty, 0.5f);
  EXPECT_EQ(k.logit_bias, 1);
  EXPECT_TRUE(k.adjusts());
}

TEST(Generation, StepsTheEnginesPickWithItsLogprobs) {
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
  auto sink = std::make_shared<RequestSink>();
  Generation g(1, r, prompt, kTokens, qwen(), eos, sink, /*forced=*/nullptr);
  EXPECT_TRUE(g.needs_logits());

  // The engine's part, as either engine does it: host::sample of the row with the generation's knobs.
  // Flat random rows put many tokens in reach of every draw, so a wrong seed, counter or knob in
  // knobs() picks a different token than the request's own knobs do.
  const int V = qwen().vocab_size();
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  std::vector<float> row(static_cast<size_t>(V)), scratch(static_cast<size_t>(V));
  std::vector<int32_t> scratch_idx(static_cast<size_t>(V));
  std::vector<int32_t> picks;
  std::vector<RowLogprobs> scores;
  int64_t pos = int64_t(prompt.size());
  for (int i = 0; i < kTokens; ++i, ++pos) {
    for (float& x : row) x = noise(rng);
    const int32_t pick = host::sample(row.data(), V, g.knobs(pos), scratch.data(), scratch_idx.data());
    const SamplingKnobs requested{.temperature = 0.9f, .top_p = 0.95f, .top_k = 200, .seed = 1234, .counter = uint64_t(pos)};
    ASSERT_EQ(pick, host::sample(row.data(), V, requested, scratch.data(), scratch_idx.data())) << "step " << i;
    const std::optional<int32_t> next = g.step(pick, row.data(), V);
    if (i + 1 < kTokens) ASSERT_EQ(next, pick) << "step " << i;
    else ASSERT_EQ(next, std::nullopt);
    picks.push_back(pick);
    scores.push_back(row_logprobs(row.data(), V, pick, 3));
  }
  EXPECT_TRUE(g.finished());

  const Output got = collect(*sink);
  EXPECT_FALSE(got.text.empty());
  EXPECT_EQ(got.text, qwen().decode(picks));
  ASSERT_EQ(got.tokens.size(), picks.size());
  for (size_t i = 0; i < picks.size(); ++i) {
    EXPECT_EQ(got.tokens[i], std::string(qwen().token_bytes(picks[i])));
    EXPECT_EQ(got.logprobs[i], scores[i].logprob);
    ASSERT_EQ(got.top[i].size(), scores[i].top.size());
    for (size_t t = 0; t < got.top[i].size(); ++t) {
      EXPECT_EQ(got.top[i][t].first, std::string(qwen().token_bytes(scores[i].top[t].token)));
      EXPECT_EQ(got.top[i][t].second, scores[i].top[t].logprob);
    }
  }
  EXPECT_EQ(got.finish, FinishReason::kLength);
  EXPECT_EQ(got.completion_tokens, int64_t(kTokens));
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
  for (int32_t want : seq) EXPECT_EQ(g.step(engine_pick, nullptr, qwen().vocab_size()), want);
  EXPECT_EQ(g.step(engine_pick, nullptr, qwen().vocab_size()), std::nullopt);  // the sequence ran out

  const Output out = collect(*sink);
  EXPECT_EQ(out.text, qwen().decode(seq));
  EXPECT_EQ(out.finish, FinishReason::kStop);
  EXPECT_EQ(out.completion_tokens, int64_t(seq.size()));
}

}  // namespace
}  // namespace rocket

namespace rocket {
namespace {

// A structured output with reasoning open: the reasoning is free text (no mask), the grammar starts
// after </think>, its mask allows exactly what continues the schema, and eos only once complete; a
// token outside the grammar fails the request rather than producing invalid JSON.
// thinking.budget_tokens: after `budget` reasoning tokens the next pick becomes </think> (fed to the
// engine in its place), and the answer follows unbudgeted; a model that closes the reasoning itself
// within the budget keeps its own picks.
TEST(Generation, AReasoningBudgetClosesTheReasoningWhenSpent) {
  const Tokenizer& tok = qwen();
  const int32_t think_close = *tok.token_id("</think>");
  const std::vector<int32_t> eos = {*tok.token_id("<|im_end|>")};
  const std::vector<int32_t> words = tok.encode(" one two three four five six");
  ASSERT_GE(words.size(), 6u);
  CompletionRequest r;
  auto sink = std::make_shared<RequestSink>();
  Generation g(1, r, tok.encode("hi"), 100, tok, eos, sink, nullptr);
  g.budget_reasoning(think_close, 3);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(g.step(words[size_t(i)], nullptr, tok.vocab_size()), words[size_t(i)]);
  EXPECT_EQ(g.step(words[3], nullptr, tok.vocab_size()), think_close);  // the budget is spent
  for (int i = 4; i < 6; ++i) EXPECT_EQ(g.step(words[size_t(i)], nullptr, tok.vocab_size()), words[size_t(i)]);
  EXPECT_EQ(g.completion_tokens(), 6);

  auto sink2 = std::make_shared<RequestSink>();
  Generation own(2, r, tok.encode("hi"), 100, tok, eos, sink2, nullptr);
  own.budget_reasoning(think_close, 3);
  ASSERT_EQ(own.step(words[0], nullptr, tok.vocab_size()), words[0]);
  ASSERT_EQ(own.step(think_close, nullptr, tok.vocab_size()), think_close);
  for (int i = 1; i < 6; ++i) EXPECT_EQ(own.step(words[size_t(i)], nullptr, tok.vocab_size()), words[size_t(i)]);
}

TEST(Generation, GrammarStartsAfterTheReasoning) {
  const Tokenizer& tok = test::qwen();
  const int32_t im_end = *tok.token_id("<|im_end|>"), think_close = *tok.token_id("</think>");
  const std::vector<int32_t> eos = {im_end};
  const grammar::Vocabulary vocabulary{grammar::TokenTrie::build(tok, tok.vocab_size()), eos};
  auto g = std::make_shared<const grammar::CompiledGrammar>(
      grammar::compile_schema(nlohmann::ordered_json::parse(R"({"enum":["yes","no"]})")), vocabulary);
  CompletionRequest r;
  auto sink = std::make_shared<RequestSink>();
  Generation gen(1, r, tok.encode("hi"), 100, tok, eos, sink, nullptr);
  gen.constrain(g, think_close);
  auto allowed = [&](const uint32_t* mask, int32_t id) { return (mask[id / 32] >> (id % 32) & 1u) != 0; };

  EXPECT_EQ(gen.token_mask(), nullptr);  // reasoning: free text
  for (int32_t id : tok.encode("Let me think.")) ASSERT_EQ(gen.step(id, nullptr, tok.vocab_size()), id);
  ASSERT_EQ(gen.step(think_close, nullptr, tok.vocab_size()), think_close);
  const uint32_t* mask = gen.token_mask();
  ASSERT_NE(mask, nullptr);
  const int32_t quote = tok.encode("\"")[0], y = tok.encode("y")[0];
  EXPECT_TRUE(allowed(mask, quote));
  EXPECT_FALSE(allowed(mask, y));
  EXPECT_FALSE(allowed(mask, im_end));
  for (int32_t id : tok.encode("\"yes\"")) {
    ASSERT_TRUE(allowed(gen.token_mask(), id)) << id;
    ASSERT_EQ(gen.step(id, nullptr, tok.vocab_size()), id);
  }
  mask = gen.token_mask();
  EXPECT_TRUE(allowed(mask, im_end));
  EXPECT_FALSE(allowed(mask, quote));
  EXPECT_EQ(gen.step(im_end, nullptr, tok.vocab_size()), std::nullopt);
  EXPECT_TRUE(gen.answered());

  // Without reasoning the grammar holds from the first token, and a token it refuses fails the request.
  auto sink2 = std::make_shared<RequestSink>();
  Generation strict(2, r, tok.encode("hi"), 100, tok, eos, sink2, nullptr);
  strict.constrain(g, std::nullopt);
  ASSERT_NE(strict.token_mask(), nullptr);
  EXPECT_EQ(strict.step(y, nullptr, tok.vocab_size()), std::nullopt);
  const std::vector<TokenEvent> events = drain(*sink2);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].error.find("does not continue the response format"), std::string::npos) << events[0].error;
}

}  // namespace
}  // namespace rocket

namespace rocket {
namespace {

// vLLM's ignore_eos and min_tokens (benchmark clients send them): under ignore_eos eos is a token
// without text and the output runs to max_tokens; min_tokens masks eos out of the first picks (with a
// grammar too, unless the grammar allows nothing else), ends nothing before it on a stop string, and an
// eos picked anyway (a forced sequence) is a token without text.
TEST(Generation, IgnoreEosAndMinTokens) {
  const Tokenizer& tok = test::qwen();
  const int V = tok.vocab_size();
  const int32_t im_end = *tok.token_id("<|im_end|>"), endoftext = *tok.token_id("<|endoftext|>");
  const std::vector<int32_t> eos = {im_end, endoftext};
  const std::vector<int32_t> a = tok.encode("Alpha beta"), b = tok.encode(" gamma");
  auto allowed = [&](const uint32_t* mask, int32_t id) { return (mask[id / 32] >> (id % 32) & 1u) != 0; };

  {  // ignore_eos: eos neither ends the output nor shows in its text; it counts as a completion token.
    CompletionRequest r;
    r.ignore_eos = true;
    r.logprobs = true;
    r.top_logprobs = 0;
    auto sink = std::make_shared<RequestSink>();
    const int max_tokens = int(a.size() + 1 + b.size());
    Generation g(1, r, tok.encode("hi"), max_tokens, tok, eos, sink, nullptr);
    EXPECT_EQ(g.token_mask(), nullptr);
    const std::vector<float> row(size_t(V), 0.0f);
    std::vector<int32_t> picks = a;
    picks.push_back(im_end);
    picks.insert(picks.end(), b.begin(), b.end());
    for (size_t i = 0; i < picks.size(); ++i) {
      const std::optional<int32_t> next = g.step(picks[i], row.data(), V);
      if (i + 1 < picks.size()) ASSERT_EQ(next, picks[i]) << i;
      else EXPECT_EQ(next, std::nullopt);
    }
    const Output out = collect(*sink);
    EXPECT_EQ(out.text, "Alpha beta gamma");
    EXPECT_EQ(out.finish, FinishReason::kLength);
    EXPECT_EQ(out.completion_tokens, max_tokens);
    ASSERT_EQ(out.tokens.size(), picks.size());  // eos has its logprob, in order
    EXPECT_EQ(out.tokens[a.size()], "<|im_end|>");
  }
  {  // min_tokens: eos masked (every other token allowed) for the first 3 picks, then free.
    CompletionRequest r;
    r.min_tokens = 3;
    r.stop = {"beta"};
    auto sink = std::make_shared<RequestSink>();
    Generation g(2, r, tok.encode("hi"), 100, tok, eos, sink, nullptr);
    g.hold_eos(V);
    const std::vector<int32_t> text = tok.encode("beta beta beta beta");
    ASSERT_EQ(text.size(), 4u);  // "beta", then " beta" three times
    for (int i = 0; i < 3; ++i) {
      const uint32_t* mask = g.token_mask();
      ASSERT_NE(mask, nullptr) << i;
      EXPECT_FALSE(allowed(mask, im_end));
      EXPECT_FALSE(allowed(mask, endoftext));
      EXPECT_TRUE(allowed(mask, text[size_t(i)]));
      EXPECT_TRUE(allowed(mask, V - 1));
      // The stop string is not looked for in the first min_tokens tokens.
      ASSERT_EQ(g.step(text[size_t(i)], nullptr, V), text[size_t(i)]) << i;
    }
    EXPECT_EQ(g.token_mask(), nullptr);
    EXPECT_EQ(g.step(text[3], nullptr, V), std::nullopt);  // " beta": the stop string now ends it
    const Output out = collect(*sink);
    EXPECT_EQ(out.text, tok.decode(std::vector<int32_t>{text[0], text[1], text[2]}) + " ");
    EXPECT_EQ(out.finish, FinishReason::kStop);
  }
  {  // An eos picked before min_tokens anyway (the mask was not applied) is a token without text.
    CompletionRequest r;
    r.min_tokens = 2;
    auto sink = std::make_shared<RequestSink>();
    Generation g(3, r, tok.encode("hi"), 100, tok, eos, sink, nullptr);
    EXPECT_EQ(g.step(im_end, nullptr, V), im_end);
    EXPECT_EQ(g.step(a[0], nullptr, V), a[0]);
    EXPECT_EQ(g.step(im_end, nullptr, V), std::nullopt);
    const Output out = collect(*sink);
    EXPECT_EQ(out.text, tok.decode(std::vector<int32_t>{a[0]}));
    EXPECT_EQ(out.completion_tokens, 2);
  }
  {  // With a grammar: eos leaves the mask while the grammar allows more, stays when it allows nothing
     // else, and a complete structured output ends at eos even under ignore_eos.
    const grammar::Vocabulary vocabulary{grammar::TokenTrie::build(tok, V), eos};
    auto schema = std::make_shared<const grammar::CompiledGrammar>(
        grammar::compile_schema(nlohmann::ordered_json::parse(R"({"type":"string","maxLength":3})")), vocabulary);
    CompletionRequest r;
    r.min_tokens = 8;
    r.ignore_eos = true;
    auto sink = std::make_shared<RequestSink>();
    Generation g(4, r, tok.encode("hi"), 100, tok, eos, sink, nullptr);
    g.constrain(schema, std::nullopt);
    g.hold_eos(V);
    const std::vector<int32_t> json = tok.encode("\"ab\"");
    for (int32_t id : json) {
      const uint32_t* mask = g.token_mask();
      ASSERT_NE(mask, nullptr);
      EXPECT_FALSE(allowed(mask, im_end));
      ASSERT_TRUE(allowed(mask, id)) << id;
      ASSERT_EQ(g.step(id, nullptr, V), id);
    }
    const uint32_t* mask = g.token_mask();  // the string is closed: only eos continues
    ASSERT_NE(mask, nullptr);
    EXPECT_TRUE(allowed(mask, im_end));
    EXPECT_EQ(g.step(im_end, nullptr, V), std::nullopt);
    const Output out = collect(*sink);
    EXPECT_EQ(out.text, "\"ab\"");
    EXPECT_EQ(out.finish, FinishReason::kStop);
  }
}

}  // namespace
}  // namespace rocket
