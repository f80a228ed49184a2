// row_logprobs: log_softmax of a logits row against values computed by hand, the top-N order (ties to
// the lower id), and a vocabulary-sized row against an FP64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "openai/logprobs.h"

namespace rocket {
namespace {

// FP32 logits, an FP64 normaliser: the error is the FP32 rounding of x - log_z, a few ulps of |x|.
constexpr float kTolerance = 2e-6f;

TEST(RowLogprobs, MatchesHandComputedLogSoftmax) {
  // log(e^1 + e^2 + e^3 + e^0) = 3.4401896985611953
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.0f};
  const RowLogprobs r = row_logprobs(logits.data(), 4, 1, 4);
  EXPECT_NEAR(r.logprob, -1.4401896985611953, kTolerance);
  ASSERT_EQ(r.top.size(), 4u);
  const int want_order[] = {2, 1, 0, 3};
  const double want_lp[] = {-0.4401896985611953, -1.4401896985611953, -2.4401896985611953, -3.4401896985611953};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r.top[i].token, want_order[i]) << i;
    EXPECT_NEAR(r.top[i].logprob, want_lp[i], kTolerance) << i;
  }
}

TEST(RowLogprobs, TopIsTruncatedAndTiesGoToTheLowerId) {
  // log(2 e^0.5 + e^-1.25 + e^2 + e^-3) = 2.39996499358956
  const std::vector<float> logits = {0.5f, -1.25f, 0.5f, 2.0f, -3.0f};
  const RowLogprobs r = row_logprobs(logits.data(), 5, 4, 3);
  EXPECT_NEAR(r.logprob, -5.39996499358956, kTolerance);
  ASSERT_EQ(r.top.size(), 3u);
  EXPECT_EQ(r.top[0].token, 3);
  EXPECT_EQ(r.top[1].token, 0);
  EXPECT_EQ(r.top[2].token, 2);
  EXPECT_NEAR(r.top[1].logprob, -1.8999649935895602, kTolerance);
  EXPECT_EQ(r.top[1].logprob, r.top[2].logprob);
  EXPECT_TRUE(row_logprobs(logits.data(), 5, 0, 0).top.empty());
}

TEST(RowLogprobs, LargeLogitsDoNotOverflow) {
  // exp(1000) overflows FP32 and FP64: the row must be shifted by its maximum first.
  const std::vector<float> logits = {1001.0f, 1002.0f, 1003.0f, 1000.0f};
  const RowLogprobs r = row_logprobs(logits.data(), 4, 2, 1);
  EXPECT_NEAR(r.logprob, -0.4401896985611953, 1e-4);  // FP32 spacing at 1000 is 6e-5
  ASSERT_TRUE(std::isfinite(r.logprob));
}

TEST(RowLogprobs, MaskedTokenIsMinusInfinity) {
  const std::vector<float> logits = {0.0f, -INFINITY, 1.0f};
  const RowLogprobs r = row_logprobs(logits.data(), 3, 1, 3);
  EXPECT_TRUE(std::isinf(r.logprob) && r.logprob < 0);
  EXPECT_EQ(r.top.back().token, 1);
  EXPECT_NEAR(r.top[0].logprob, 1.0 - std::log(1.0 + std::exp(1.0)), kTolerance);
}

TEST(RowLogprobs, VocabularySizedRowAgainstFp64Reference) {
  const int vocab = 151936;
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = normal(rng);
  logits[777] = 25.0f;  // a peaked row, as a trained model's; far above the normal tail

  double mx = -INFINITY, sum = 0.0;
  for (float x : logits) mx = std::max(mx, double(x));
  for (float x : logits) sum += std::exp(double(x) - mx);
  const double log_z = mx + std::log(sum);

  std::vector<int> order(vocab);
  for (int i = 0; i < vocab; ++i) order[i] = i;
  std::partial_sort(order.begin(), order.begin() + 20, order.end(),
                    [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });

  const RowLogprobs r = row_logprobs(logits.data(), vocab, 4242, 20);
  EXPECT_NEAR(r.logprob, double(logits[4242]) - log_z, 1e-5);
  ASSERT_EQ(r.top.size(), 20u);
  EXPECT_EQ(r.top[0].token, 777);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(r.top[i].token, order[i]) << "rank " << i;
    EXPECT_NEAR(r.top[i].logprob, double(logits[order[i]]) - log_z, 1e-5) << "rank " << i;
  }
}

}  // namespace
}  // namespace rocket
