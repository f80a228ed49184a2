// Generation: a stop requested through the RequestSink (parallel_tool_calls=false has its call) ends
// the request at its next token as a stop string would: no further token, the final event with usage.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serve/generation.h"
#include "serve/openai_request.h"

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

}  // namespace
}  // namespace rocket
