// The quality gate's figures against values worked by hand (KL of two known distributions, the p99
// rank, greedy prefixes), its thresholds, and the token-windows file the engines score.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "engine/score.h"
#include "gate/gate_metrics.h"

namespace rocket {
namespace {

std::vector<float> logp(std::initializer_list<double> p) {
  std::vector<float> out;
  for (double x : p) out.push_back(float(std::log(x)));
  return out;
}

TEST(GateMetrics, KlOfKnownDistributions) {
  GateMetrics m;
  // KL((0.5, 0.5) || (0.9, 0.1)) = 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.1) = 0.51082562376599
  m.add_row(logp({0.5, 0.5}), logp({0.9, 0.1}), 1);
  const GateFigures f = m.figures();
  EXPECT_EQ(f.positions, 1);
  EXPECT_NEAR(f.kl_mean, 0.51082562376599, 1e-6);
  EXPECT_NEAR(f.kl_max, f.kl_mean, 1e-12);
  // The reference's argmax is token 0 (a tie keeps the first), the candidate's token 0 too.
  EXPECT_EQ(f.top1_agreement, 1.0);
  // The target is token 1: perplexity 1 / 0.5 and 1 / 0.1.
  EXPECT_NEAR(f.perplexity_reference, 2.0, 1e-5);
  EXPECT_NEAR(f.perplexity_candidate, 10.0, 1e-4);
}

TEST(GateMetrics, IdenticalRowsAgreeWhole) {
  GateMetrics m;
  for (int i = 0; i < 10; ++i) m.add_row(logp({0.2, 0.3, 0.5}), logp({0.2, 0.3, 0.5}), i % 3);
  m.add_greedy(std::vector<int32_t>{4, 5, 6}, std::vector<int32_t>{4, 5, 6});
  const GateFigures f = m.figures();
  EXPECT_EQ(f.kl_mean, 0.0);
  EXPECT_EQ(f.kl_p99, 0.0);
  EXPECT_EQ(f.top1_agreement, 1.0);
  EXPECT_EQ(f.perplexity_reference, f.perplexity_candidate);
  EXPECT_EQ(f.greedy_agreement, 1.0);
  EXPECT_EQ(f.greedy_whole, 1);
  EXPECT_TRUE(gate_violations(f, {.max_kl_mean = 0, .max_kl_p99 = 0, .min_top1 = 1, .min_greedy = 1}).empty());
}

TEST(GateMetrics, P99AndTop1AndGreedyPrefix) {
  GateMetrics m;
  // 100 rows whose KL grows with i: the candidate moves mass from token 0 to token 1.
  for (int i = 0; i < 100; ++i) {
    const double q = 0.5 - 0.004 * i;
    m.add_row(logp({0.5, 0.5}), logp({q, 1 - q}), -1);
  }
  m.add_greedy(std::vector<int32_t>{1, 2, 3, 4}, std::vector<int32_t>{1, 2, 9, 4});  // 2 of 4 before a difference
  m.add_greedy(std::vector<int32_t>{1, 2, 3, 4}, std::vector<int32_t>{7, 2, 3, 4});  // 0 of 4
  const GateFigures f = m.figures();
  auto kl = [](double q) { return 0.5 * std::log(0.5 / q) + 0.5 * std::log(0.5 / (1 - q)); };
  EXPECT_NEAR(f.kl_p99, kl(0.5 - 0.004 * 98), 1e-6);  // the 99th of 100 in order
  EXPECT_NEAR(f.kl_max, kl(0.5 - 0.004 * 99), 1e-6);
  // Row 0 ties (0.5, 0.5) in both: agreed; every later row the candidate prefers token 1.
  EXPECT_DOUBLE_EQ(f.top1_agreement, 0.01);
  EXPECT_EQ(f.perplexity_reference, 0.0);  // no targets given
  EXPECT_DOUBLE_EQ(f.greedy_agreement, 0.25);
  EXPECT_EQ(f.greedy_whole, 0);
  const auto v = gate_violations(f, {.max_kl_mean = 0.01, .max_kl_p99 = -1, .min_top1 = 0.5, .min_greedy = 0.2});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_NE(v[0].find("KL mean"), std::string::npos);
  EXPECT_NE(v[1].find("top-1 agreement"), std::string::npos);
}

TEST(ScoreWindows, RoundTripAndRefusals) {
  const auto dir = std::filesystem::temp_directory_path() / "rocket_gate_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "w.rktw").string();
  ScoreWindows w{.length = 3, .ids = {1, 2, 3, 4, 5, 6}};
  save_score_windows(path, w);
  const ScoreWindows back = load_score_windows(path);
  EXPECT_EQ(back.length, 3);
  EXPECT_EQ(back.count(), 2);
  EXPECT_EQ(back.ids, w.ids);
  {
    std::ofstream f(path, std::ios::binary | std::ios::app);
    f.put('x');
  }
  EXPECT_THROW(load_score_windows(path), Error);  // longer than its header says
  {
    std::ofstream f(path, std::ios::binary);
    f << "NOPE";
  }
  EXPECT_THROW(load_score_windows(path), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rocket
