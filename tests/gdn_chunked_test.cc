// The chunked gated delta rule (kernels/host/gdn_chunked.h) against the sequential one
// (host::gdn_step, itself tested against the matrix form in host_kernels_test.cc): outputs, the final
// state and the states recorded at chunk boundaries, over pieces that start on and off a chunk boundary,
// with decays near 0 and near 1 and a nonzero initial state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/host/gdn.h"
#include "kernels/host/gdn_chunked.h"

namespace rocket::host {
namespace {

constexpr double kU = 0x1.0p-24;  // fp32 unit roundoff
constexpr int C = kGdnChunkTokens;

struct Piece {
  int Hk, Hv, Kd, Vd, n;
  std::vector<float> q, k, v, g, beta, state0;
};

// Raw q, k and v uniform in ±[0.05, 1]; per value head its own decay regime, so one piece holds
// decays that keep the state (g ~ -1e-4), that wipe it (g <= -8: decay ~ 3e-4 .. 1e-13), and mixes.
Piece random_piece(int Hk, int Hv, int Kd, int Vd, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  Piece p{Hk, Hv, Kd, Vd, n, {}, {}, {}, {}, {}, {}};
  const auto fill = [&](std::vector<float>& x, size_t count, float lo, float hi) {
    std::uniform_real_distribution<float> mag(lo, hi);
    std::bernoulli_distribution neg(0.5);
    x.resize(count);
    for (auto& e : x) e = neg(rng) ? -mag(rng) : mag(rng);
  };
  fill(p.q, size_t(n) * Hk * Kd, 0.05f, 1.0f);
  fill(p.k, size_t(n) * Hk * Kd, 0.05f, 1.0f);
  fill(p.v, size_t(n) * Hv * Vd, 0.05f, 1.0f);
  fill(p.state0, size_t(Hv) * Kd * Vd, 0.05f, 0.5f);
  p.g.resize(size_t(n) * Hv);
  p.beta.resize(size_t(n) * Hv);
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < Hv; ++h) {
      const float r = u01(rng);
      float g = 0;
      switch (h % 4) {
        case 0: g = -1e-4f * (0.1f + r); break;                              // decay ~ 1
        case 1: g = -8.0f - 22.0f * r; break;                                // decay ~ 0
        case 2: g = r < 0.1f ? -20.0f : -3.0f * r; break;                     // mostly moderate, some resets
        default: g = -std::exp(-6.0f + 8.0f * r); break;                     // log-uniform over 2.5e-3 .. 7
      }
      p.g[size_t(t) * Hv + h] = g;
      p.beta[size_t(t) * Hv + h] = 0.02f + 0.97f * u01(rng);
    }
  return p;
}

struct Result {
  std::vector<float> out, state;
  std::map<int, std::vector<float>> chunk_states;  // absolute position -> state there
};

Result run_sequential(const Piece& p, int pos0, const std::vector<float>& g) {
  Result r{std::vector<float>(size_t(p.n) * p.Hv * p.Vd), p.state0, {}};
  for (int t = 0; t < p.n; ++t) {
    gdn_step(r.state.data(), p.q.data() + size_t(t) * p.Hk * p.Kd, p.k.data() + size_t(t) * p.Hk * p.Kd,
             p.v.data() + size_t(t) * p.Hv * p.Vd, g.data() + size_t(t) * p.Hv, p.beta.data() + size_t(t) * p.Hv, p.Hk,
             p.Hv, p.Kd, p.Vd, r.out.data() + size_t(t) * p.Hv * p.Vd);
    if ((pos0 + t + 1) % C == 0) r.chunk_states[pos0 + t + 1] = r.state;
  }
  return r;
}

Result run_chunked(const Piece& p, int pos0) {
  Result r{std::vector<float>(size_t(p.n) * p.Hv * p.Vd, NAN), p.state0, {}};
  gdn_chunked(r.state.data(), p.q.data(), p.k.data(), p.v.data(), p.g.data(), p.beta.data(), p.n, pos0, p.Hk, p.Hv,
              p.Kd, p.Vd, r.out.data(), [&](int pos, const float* s) {
                r.chunk_states[pos].assign(s, s + r.state.size());
              });
  return r;
}

// max |got - want| over max |want| per value head (the heads' scales differ by orders of magnitude:
// a head whose decay wipes the state carries only its latest tokens); NaN counts as infinite.
double head_error(const std::vector<float>& got, const std::vector<float>& want, int64_t rows, int Hv, int64_t per_head) {
  double worst = 0;
  for (int h = 0; h < Hv; ++h) {
    double scale = 0, diff = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < per_head; ++i) {
        const size_t at = size_t((r * Hv + h) * per_head + i);
        scale = std::max(scale, double(std::fabs(want[at])));
        const double d = std::fabs(double(got[at]) - double(want[at]));
        diff = std::isnan(d) ? INFINITY : std::max(diff, d);
      }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// NOTE: the tolerance. Both forms compute the same values in fp32 with sums in other orders. Per token
// the sequential rule rounds each state entry through two Kd-term dot products with unit vectors plus
// a few scalar operations: at most ~(4 Kd + 16) u of the head's scale (the bound gdn_check uses per
// token), and the chunked form reaches the same entries through dot products of the same lengths and
// the chunk's C-term sums. The recurrence is non-expansive (decay <= 1, I - beta k kᵀ has norm <= 1),
// so errors do not grow, they add up, and independent roundings add up like a random walk (Higham &
// Mary's probabilistic bound, lambda sqrt(N) u for N roundings; lambda = 2 here). The tolerance is the
// larger of one token's worst case and n tokens' walk: 3.3e-5 at n = 513, Kd = 32, where the forms
// differ by ~1e-6. A decay taken from the neighbouring token moves outputs by ~1e-1 (the last test).
double tolerance(int n, int Kd) {
  const double per_token = 4.0 * Kd + 16.0;
  return std::max(per_token, 2.0 * std::sqrt(double(n) * per_token)) * kU;
}

void check_piece(int Hk, int Hv, int Kd, int Vd, int n, int pos0, uint32_t seed) {
  SCOPED_TRACE("Hk=" + std::to_string(Hk) + " Hv=" + std::to_string(Hv) + " Kd=" + std::to_string(Kd) +
               " Vd=" + std::to_string(Vd) + " n=" + std::to_string(n) + " pos0=" + std::to_string(pos0));
  const Piece p = random_piece(Hk, Hv, Kd, Vd, n, seed);
  const Result want = run_sequential(p, pos0, p.g);
  const Result got = run_chunked(p, pos0);
  const double tol = tolerance(n, Kd);
  const double out_err = head_error(got.out, want.out, n, Hv, Vd);
  const double state_err = head_error(got.state, want.state, 1, Hv, int64_t(Kd) * Vd);
  EXPECT_LE(out_err, tol) << "outputs";
  EXPECT_LE(state_err, tol) << "final state";
  ASSERT_EQ(got.chunk_states.size(), want.chunk_states.size()) << "chunk boundaries recorded";
  for (const auto& [pos, s] : want.chunk_states) {
    ASSERT_TRUE(got.chunk_states.count(pos)) << "no state recorded at position " << pos;
    EXPECT_LE(head_error(got.chunk_states.at(pos), s, 1, Hv, int64_t(Kd) * Vd), tol) << "state at position " << pos;
  }
  std::printf("  n=%4d pos0=%2d Kd=%3d: out %.2e state %.2e (tolerance %.2e), %zu chunk states\n", n, pos0, Kd, out_err,
              state_err, tol, want.chunk_states.size());
}

TEST(HostGdnChunked, EqualsSequentialRule) {
  uint32_t seed = 100;
  for (int n : {1, 7, 64, 65, 200, 513})
    for (int pos0 : {0, 13, 64}) check_piece(2, 4, 32, 24, n, pos0, seed++);
}

TEST(HostGdnChunked, EqualsSequentialRuleAtA3bHeadDims) {
  check_piece(1, 4, 128, 128, 200, 13, 7);
  check_piece(1, 4, 128, 128, 64, 0, 8);
}

// The measure above sees a decay taken from the neighbouring token: the sequential rule with g shifted
// by one token differs from the chunked result by far more than the tolerance.
TEST(HostGdnChunked, ToleranceCatchesShiftedDecay) {
  const Piece p = random_piece(2, 4, 32, 24, 200, 9);
  std::vector<float> shifted(p.g);
  std::rotate(shifted.begin(), shifted.begin() + p.Hv, shifted.end());
  const Result wrong = run_sequential(p, 13, shifted);
  const Result got = run_chunked(p, 13);
  const double tol = tolerance(p.n, p.Kd);
  EXPECT_GT(head_error(got.out, wrong.out, p.n, p.Hv, p.Vd), 100 * tol);
  EXPECT_GT(head_error(got.state, wrong.state, 1, p.Hv, int64_t(p.Kd) * p.Vd), 100 * tol);
}

}  // namespace
}  // namespace rocket::host
