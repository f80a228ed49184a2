// Host (CPU) kernels against independent naive references computed in double from the defining
// formulas. Inputs are random and never zero, so a kernel that skips a term cannot pass by accident.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/host/activations.h"
#include "kernels/host/attention.h"
#include "kernels/host/conv1d.h"
#include "kernels/host/gdn.h"
#include "kernels/host/dense.h"
#include "kernels/host/moe.h"
#include "kernels/host/rms_norm.h"
#include "kernels/host/sample.h"
#include "kernels/host/weights.h"

namespace rocket::host {
namespace {

constexpr double kU = 0x1.0p-24;  // fp32 unit roundoff

// Uniform in ±[lo, hi]: bounded away from zero.
std::vector<float> random_vec(std::mt19937& rng, size_t n, float lo = 0.05f, float hi = 1.0f) {
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = neg(rng) ? -mag(rng) : mag(rng);
  return v;
}

std::vector<uint16_t> random_bf16(std::mt19937& rng, size_t n, float lo = 0.05f, float hi = 1.0f) {
  std::vector<uint16_t> v(n);
  auto f = random_vec(rng, n, lo, hi);
  for (size_t i = 0; i < n; ++i) v[i] = f32_to_bf16(f[i]);
  return v;
}

// Checks |got - want| <= tol[i] elementwise; on failure reports the first bad coordinate and the
// largest difference, so one message locates the bug.
void expect_close(const std::string& what, const float* got, const double* want, const double* tol, size_t n) {
  size_t first = n, worst = 0;
  double worst_diff = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(got[i]) - want[i]);
    if (!(d <= tol[i]) && first == n) first = i;
    if (!(d <= worst_diff)) { worst_diff = d; worst = i; }
  }
  EXPECT_EQ(first, n) << what << ": first mismatch at [" << first << "] got " << got[first] << " want "
                      << want[first] << " tol " << tol[first] << "; max |diff| " << worst_diff << " at ["
                      << worst << "] of " << n;
}

void expect_close(const std::string& what, const float* got, const double* want, size_t n, double atol,
                  double rtol) {
  std::vector<double> tol(n);
  for (size_t i = 0; i < n; ++i) tol[i] = atol + rtol * std::fabs(want[i]);
  expect_close(what, got, want, tol.data(), n);
}

double silu_d(double x) { return x / (1.0 + std::exp(-x)); }

// ---------------------------------------------------------------------------------------------
// Quantised weights built the way the loader sees them, plus their exact values in double.

struct QuantWeight {
  Precision precision = Precision::kBF16;
  int64_t rows = 0, cols = 0;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> bytes;
  std::vector<float> scale_inv;
  std::vector<uint8_t> scale16;
  float scale2 = 1.0f;
  std::vector<double> exact;  // W[r][c] from the layout definition, in double

  WeightView view() const {
    WeightView v{.precision = precision, .rows = rows, .cols = cols, .data = nullptr,
                 .scale_inv = nullptr, .scale16 = nullptr, .scale2 = scale2};
    if (precision == Precision::kBF16) v.data = bf16.data();
    else v.data = bytes.data();
    if (precision == Precision::kFP8Block) v.scale_inv = scale_inv.data();
    if (precision == Precision::kNVFP4) v.scale16 = scale16.data();
    return v;
  }
};

QuantWeight make_weight(std::mt19937& rng, Precision p, int64_t rows, int64_t cols) {
  QuantWeight w;
  w.precision = p;
  w.rows = rows;
  w.cols = cols;
  w.exact.resize(size_t(rows * cols));
  auto f = random_vec(rng, size_t(rows * cols));
  std::uniform_real_distribution<float> s(0.5f, 2.0f);
  switch (p) {
    case Precision::kBF16:
      w.bf16.resize(f.size());
      for (size_t i = 0; i < f.size(); ++i) {
        w.bf16[i] = f32_to_bf16(f[i]);
        w.exact[i] = bf16_to_f32(w.bf16[i]);
      }
      break;
    case Precision::kFP8Block: {
      const int64_t rb = (rows + 127) / 128, cb = (cols + 127) / 128;
      w.scale_inv.resize(size_t(rb * cb));
      for (auto& x : w.scale_inv) x = s(rng) / 448.0f;
      w.bytes.resize(f.size());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const double sc = w.scale_inv[size_t((r / 128) * cb + c / 128)];
          const size_t i = size_t(r * cols + c);
          w.bytes[i] = f32_to_e4m3(float(f[i] / sc));
          w.exact[i] = double(e4m3_to_f32(w.bytes[i])) * sc;
        }
      }
      break;
    }
    case Precision::kNVFP4: {
      w.scale2 = 0.0137f;
      w.scale16.resize(size_t(rows * cols / 16));
      for (auto& x : w.scale16) x = f32_to_e4m3(s(rng) * 3.0f);
      w.bytes.assign(size_t(rows * cols / 2), 0);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const size_t i = size_t(r * cols + c);
          const uint8_t nib = f32_to_e2m1(f[i] * 6.0f);
          uint8_t& byte = w.bytes[size_t(r * cols / 2 + c / 2)];
          byte |= (c % 2 == 0) ? nib : uint8_t(nib << 4);
          w.exact[i] = double(e2m1_to_f32(nib)) * double(e4m3_to_f32(w.scale16[size_t(r * cols / 16 + c / 16)])) *
                       double(w.scale2);
        }
      }
      break;
    }
  }
  return w;
}

const char* name(Precision p) {
  switch (p) {
    case Precision::kBF16: return "bf16";
    case Precision::kFP8Block: return "fp8";
    case Precision::kNVFP4: return "nvfp4";
  }
  return "?";
}

TEST(HostWeights, DequantizeRowMatchesLayoutDefinition) {
  std::mt19937 rng(1);
  for (Precision p : {Precision::kBF16, Precision::kFP8Block, Precision::kNVFP4}) {
    const int64_t rows = 300, cols = p == Precision::kNVFP4 ? 272 : 261;  // partial 128-blocks both ways
    QuantWeight w = make_weight(rng, p, rows, cols);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r : {int64_t(0), int64_t(127), int64_t(128), int64_t(299)}) {
      dequantize_row(w.view(), r, row.data());
      // bf16 and fp8 are one exact product, rounded once: equal to the double value rounded to fp32.
      // NVFP4 folds e4m3*scale2 first: at most two roundings.
      const double rtol = p == Precision::kNVFP4 ? 2 * kU : 0.0;
      std::vector<double> want(w.exact.begin() + r * cols, w.exact.begin() + (r + 1) * cols);
      if (p != Precision::kNVFP4)
        for (auto& x : want) x = double(float(x));
      expect_close(std::string(name(p)) + " row " + std::to_string(r), row.data(), want.data(), size_t(cols),
                   0.0, rtol);
    }
  }
}

TEST(HostWeights, Nvfp4LowNibbleIsEvenElement) {
  // One row of 16: byte 0 = 0x21 -> element 0 = e2m1(0x1) = 0.5, element 1 = e2m1(0x2) = 1.0.
  std::vector<uint8_t> data(8, 0x00);
  data[0] = 0x21;
  data[7] = 0xf3;  // element 14 = e2m1(0x3) = 1.5, element 15 = e2m1(0xf) = -6
  const uint8_t scale = f32_to_e4m3(2.0f);
  WeightView v{.precision = Precision::kNVFP4, .rows = 1, .cols = 16, .data = data.data(),
               .scale_inv = nullptr, .scale16 = &scale, .scale2 = 0.5f};
  float row[16];
  dequantize_row(v, 0, row);
  EXPECT_EQ(row[0], 0.5f);
  EXPECT_EQ(row[1], 1.0f);
  EXPECT_EQ(row[2], 0.0f);
  EXPECT_EQ(row[14], 1.5f);
  EXPECT_EQ(row[15], -6.0f);
}

// ---------------------------------------------------------------------------------------------

void check_linear(Precision p, int64_t rows, int64_t cols, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  QuantWeight w = make_weight(rng, p, rows, cols);
  auto x = random_vec(rng, size_t(n * cols));
  std::vector<float> y(size_t(n * rows), NAN);
  linear(w.view(), x.data(), n, y.data());
  std::vector<double> want(y.size()), tol(y.size());
  for (int t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double term = w.exact[size_t(r * cols + c)] * double(x[size_t(t * cols + c)]);
        s += term;
        mag += std::fabs(term);
      }
      want[size_t(t * rows + r)] = s;
      // The kernel sums in 8 interleaved fp32 chains of <= cols/8 products, then adds the 8 partial
      // sums and a < 8-term tail: each product passes through <= cols/8 + 16 roundings (Higham's
      // gamma bound; FMA only removes some), plus 2 from dequantisation, times sum|w x|.
      tol[size_t(t * rows + r)] = double(cols / 8 + 18) * kU * mag;
    }
  }
  expect_close(fmt::format("linear {} {}x{} n={}", name(p), rows, cols, n), y.data(), want.data(), tol.data(),
               y.size());
}

TEST(HostLinear, AllPrecisionsMatchDequantisedMatmul) {
  for (Precision p : {Precision::kBF16, Precision::kFP8Block, Precision::kNVFP4}) {
    const bool fp4 = p == Precision::kNVFP4;
    // Sizes cross the 16-row block, the 4-row micro-kernel, the 8-lane and 128-block tails, and the
    // OpenMP threshold in both directions.
    check_linear(p, 7, fp4 ? 32 : 13, 1, 10);
    check_linear(p, 203, fp4 ? 336 : 333, 1, 11);
    check_linear(p, 203, fp4 ? 336 : 333, 3, 12);
    check_linear(p, 130, fp4 ? 1024 : 1031, 7, 13);
  }
}

TEST(HostLinear, BatchInvariant) {
  // Token t's output must not depend on what else is in the batch: the engine relies on it for
  // reproducible sampling across bucket sizes.
  std::mt19937 rng(5);
  QuantWeight w = make_weight(rng, Precision::kFP8Block, 150, 300);
  const int n = 5;
  auto x = random_vec(rng, size_t(n * 300));
  std::vector<float> batched(size_t(n * 150)), single(size_t(n * 150));
  linear(w.view(), x.data(), n, batched.data());
  for (int t = 0; t < n; ++t) linear(w.view(), x.data() + t * 300, 1, single.data() + t * 150);
  for (size_t i = 0; i < batched.size(); ++i) ASSERT_EQ(batched[i], single[i]) << "first difference at " << i;
}

// ---------------------------------------------------------------------------------------------

TEST(HostNorm, RmsNormZeroCentred) {
  std::mt19937 rng(2);
  const int dim = 203;
  const float eps = 1e-6f;
  auto x = random_vec(rng, dim, 0.05f, 3.0f);
  auto w = random_bf16(rng, dim, 0.05f, 0.5f);
  std::vector<float> y(dim);
  rms_norm_zero_centred(x.data(), w.data(), dim, eps, y.data());
  double ms = 0;
  for (float v : x) ms += double(v) * v;
  const double inv = 1.0 / std::sqrt(ms / dim + eps);
  std::vector<double> want(dim);
  for (int i = 0; i < dim; ++i) want[i] = x[i] * inv * (1.0 + bf16_to_f32(w[i]));
  // Relative error: sum of squares (<= dim*u), halved by sqrt, then a few roundings.
  expect_close("rms_norm_zero_centred", y.data(), want.data(), dim, 0.0, (dim / 2 + 8) * kU);
  // In place gives the same bits.
  std::vector<float> in_place = x;
  rms_norm_zero_centred(in_place.data(), w.data(), dim, eps, in_place.data());
  EXPECT_EQ(in_place, y);
}

TEST(HostNorm, RmsNormGatedUsesPlainGain) {
  std::mt19937 rng(3);
  const int dim = 128;
  const float eps = 1e-6f;
  auto x = random_vec(rng, dim, 0.05f, 3.0f);
  auto z = random_vec(rng, dim, 0.05f, 4.0f);
  auto w = random_bf16(rng, dim, 0.5f, 1.5f);
  std::vector<float> y(dim);
  rms_norm_gated(x.data(), z.data(), w.data(), dim, eps, y.data());
  double ms = 0;
  for (float v : x) ms += double(v) * v;
  const double inv = 1.0 / std::sqrt(ms / dim + eps);
  std::vector<double> want(dim);
  for (int i = 0; i < dim; ++i) want[i] = x[i] * inv * bf16_to_f32(w[i]) * silu_d(z[i]);
  // As above plus silu's exp and divide (a few ulps each).
  expect_close("rms_norm_gated", y.data(), want.data(), dim, 0.0, (dim / 2 + 16) * kU);
}

TEST(HostNorm, L2Normalize) {
  std::mt19937 rng(4);
  const int dim = 77;
  auto x = random_vec(rng, dim);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  std::vector<double> want(dim);
  for (int i = 0; i < dim; ++i) want[i] = x[i] / std::sqrt(ss + 1e-6);
  l2_normalize(x.data(), dim);
  expect_close("l2_normalize", x.data(), want.data(), dim, 0.0, (dim / 2 + 8) * kU);
}

TEST(HostActivations, MatchDefinitions) {
  for (float x : {-30.0f, -5.5f, -0.3f, 0.7f, 4.0f, 19.9f, 20.5f, 60.0f}) {
    EXPECT_NEAR(silu(x), silu_d(x), 4 * kU * std::fabs(silu_d(x)) + 1e-30) << x;
    EXPECT_NEAR(sigmoid(x), 1.0 / (1.0 + std::exp(-double(x))), 4 * kU) << x;
    const double sp = x > 20 ? double(x) : std::log1p(std::exp(double(x)));
    EXPECT_NEAR(softplus(x), sp, 4 * kU * std::fabs(sp)) << x;
  }
  EXPECT_EQ(softplus(25.0f), 25.0f);  // torch's threshold passes x through
}

// ---------------------------------------------------------------------------------------------

TEST(HostConv, StepSequenceEqualsCausalConvolution) {
  for (int K : {4, 2}) {
    std::mt19937 rng(6 + K);
    const int C = 37, T = 12, hist = K - 1;
    auto w = random_bf16(rng, size_t(C * K));
    auto xs = random_vec(rng, size_t(T * C), 0.05f, 2.0f);
    std::vector<float> state(size_t(C * hist), 0.0f), out(size_t(T * C));
    for (int t = 0; t < T; ++t) conv1d_step(state.data(), xs.data() + t * C, w.data(), C, K, out.data() + t * C);
    // F.conv1d(x, w, padding=K-1, groups=C)[..., :T]: out[t] = sum_j w[j] * x[t - (K-1) + j], x<0 = 0.
    std::vector<double> want(size_t(T * C));
    for (int t = 0; t < T; ++t) {
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int j = 0; j < K; ++j) {
          const int src = t - hist + j;
          if (src >= 0) s += double(bf16_to_f32(w[size_t(c * K + j)])) * xs[size_t(src * C + c)];
        }
        want[size_t(t * C + c)] = silu_d(s);
      }
    }
    expect_close(fmt::format("conv K={}", K), out.data(), want.data(), want.size(), 1e-7, 16 * kU);
    // The state ends holding the last K-1 inputs, oldest first.
    for (int c = 0; c < C; ++c)
      for (int j = 0; j < hist; ++j)
        ASSERT_EQ(state[size_t(c * hist + j)], xs[size_t((T - hist + j) * C + c)]) << "state c=" << c << " j=" << j;
  }
}

// ---------------------------------------------------------------------------------------------

// Reference delta rule in matrix form, S [Kd][Vd] (rows index the key dim):
//   S_t = (I - beta k kᵀ) exp(g) S_{t-1} + beta k vᵀ,   o_t = S_tᵀ q,
// which is the HF recurrence (kv_mem = Sᵀk, S += k deltaᵀ) written as one linear map.
struct GdnReference {
  int Hk, Hv, Kd, Vd;
  std::vector<double> S;  // [Hv][Kd][Vd]

  GdnReference(int hk, int hv, int kd, int vd) : Hk(hk), Hv(hv), Kd(kd), Vd(vd), S(size_t(hv * kd * vd), 0.0) {}

  void step(const float* q, const float* k, const float* v, const float* g, const float* beta, std::vector<double>& out) {
    out.assign(size_t(Hv * Vd), 0.0);
    for (int h = 0; h < Hv; ++h) {
      const int kh = h * Hk / Hv;
      std::vector<double> qn(Kd), kn(Kd);
      double sq = 0, sk = 0;
      for (int i = 0; i < Kd; ++i) { sq += double(q[kh * Kd + i]) * q[kh * Kd + i]; sk += double(k[kh * Kd + i]) * k[kh * Kd + i]; }
      for (int i = 0; i < Kd; ++i) {
        qn[i] = q[kh * Kd + i] / std::sqrt(sq + 1e-6) / std::sqrt(double(Kd));
        kn[i] = k[kh * Kd + i] / std::sqrt(sk + 1e-6);
      }
      double* Sh = S.data() + size_t(h) * Kd * Vd;
      const double a = std::exp(double(g[h])), b = beta[h];
      // P = I - b k kᵀ; S <- P (a S) + b k vᵀ
      std::vector<double> next(size_t(Kd * Vd));
      for (int i = 0; i < Kd; ++i) {
        for (int j = 0; j < Vd; ++j) {
          double s = 0;
          for (int m = 0; m < Kd; ++m) s += ((i == m ? 1.0 : 0.0) - b * kn[i] * kn[m]) * a * Sh[m * Vd + j];
          next[size_t(i * Vd + j)] = s + b * kn[i] * v[h * Vd + j];
        }
      }
      std::copy(next.begin(), next.end(), Sh);
      for (int j = 0; j < Vd; ++j) {
        double o = 0;
        for (int i = 0; i < Kd; ++i) o += Sh[i * Vd + j] * qn[i];
        out[size_t(h * Vd + j)] = o;
      }
    }
  }
};

void check_gdn(int Hk, int Hv, int Kd, int Vd, int T, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> state(size_t(Hv * Kd * Vd), 0.0f), out(size_t(Hv * Vd));
  GdnReference ref(Hk, Hv, Kd, Vd);
  std::vector<double> want;
  std::uniform_real_distribution<float> gdist(-2.0f, -0.01f), bdist(0.05f, 0.99f);
  for (int t = 0; t < T; ++t) {
    auto q = random_vec(rng, size_t(Hk * Kd)), k = random_vec(rng, size_t(Hk * Kd));
    auto v = random_vec(rng, size_t(Hv * Vd), 0.05f, 2.0f);
    std::vector<float> g(Hv), beta(Hv);
    for (auto& x : g) x = gdist(rng);
    for (auto& x : beta) x = bdist(rng);
    const auto q0 = q, k0 = k;
    gdn_step(state.data(), q.data(), k.data(), v.data(), g.data(), beta.data(), Hk, Hv, Kd, Vd, out.data());
    ASSERT_EQ(q, q0) << "gdn_step modified q";
    ASSERT_EQ(k, k0) << "gdn_step modified k";
    ref.step(q.data(), k.data(), v.data(), g.data(), beta.data(), want);
    // The recurrence is non-expansive (decay <= 1, |I - b k kᵀ| <= 1 for unit k, b < 1), so fp32
    // error grows at most linearly in t: each step adds Kd-term dot products of unit-norm vectors
    // with entries of S and v bounded by |v| <= 2.
    const double atol = (t + 1) * 2.0 * Kd * kU * 2.0;
    expect_close(fmt::format("gdn out Hv={} Kd={} Vd={} t={}", Hv, Kd, Vd, t), out.data(), want.data(), want.size(),
                 atol, 0.0);
  }
  expect_close("gdn final state", state.data(), ref.S.data(), ref.S.size(), T * 2.0 * Kd * kU * 2.0, 0.0);
}

TEST(HostGdn, StepsMatchMatrixFormOfDeltaRule) {
  check_gdn(2, 4, 16, 12, 10, 21);   // two v-heads per k-head, serial
  check_gdn(1, 1, 8, 8, 6, 22);
  check_gdn(2, 8, 64, 48, 4, 23);    // big enough to run heads in parallel
}

TEST(HostGdn, RepeatInterleaveSharesKeyHeads) {
  // With Hk=2, Hv=4, v-heads 0,1 read k-head 0 and 2,3 read k-head 1: identical v and gates on heads
  // 0 and 1 must give identical outputs; heads 1 and 2 must differ.
  const int Hk = 2, Hv = 4, Kd = 8, Vd = 8;
  std::mt19937 rng(24);
  auto q = random_vec(rng, Hk * Kd), k = random_vec(rng, Hk * Kd);
  auto vh = random_vec(rng, Vd);
  std::vector<float> v;
  for (int h = 0; h < Hv; ++h) v.insert(v.end(), vh.begin(), vh.end());
  std::vector<float> g(Hv, -0.1f), beta(Hv, 0.5f), state(size_t(Hv * Kd * Vd), 0.0f), out(size_t(Hv * Vd));
  gdn_step(state.data(), q.data(), k.data(), v.data(), g.data(), beta.data(), Hk, Hv, Kd, Vd, out.data());
  for (int j = 0; j < Vd; ++j) EXPECT_EQ(out[j], out[Vd + j]) << j;
  EXPECT_NE(out[Vd], out[2 * Vd]);
}

// ---------------------------------------------------------------------------------------------

TEST(HostRope, PositionZeroIsIdentity) {
  std::mt19937 rng(30);
  const int heads = 3, hd = 64, rot = 16;
  auto x = random_vec(rng, heads * hd);
  auto y = x;
  apply_rope(y.data(), heads, hd, rot, 0, 1e7);
  EXPECT_EQ(x, y);
}

TEST(HostRope, MatchesTorchRecipeAndPreservesNorms) {
  std::mt19937 rng(31);
  const int heads = 4, hd = 64, rot = 16, half = rot / 2;
  for (int64_t pos : {int64_t(1), int64_t(7), int64_t(12345), int64_t(262000)}) {
    auto x = random_vec(rng, heads * hd);
    auto y = x;
    apply_rope(y.data(), heads, hd, rot, pos, 1e7);
    std::vector<double> want(x.size());
    for (int h = 0; h < heads; ++h) {
      const float* xh = x.data() + h * hd;
      double n_in = 0, n_out = 0;
      for (int i = 0; i < half; ++i) {
        // torch's fp32 inv_freq and angle; the trig and rotation in double.
        const float inv_freq = 1.0f / std::pow(1e7f, float(2 * i) / float(rot));
        const double ang = double(float(pos) * inv_freq);
        want[h * hd + i] = xh[i] * std::cos(ang) - xh[i + half] * std::sin(ang);
        want[h * hd + i + half] = xh[i + half] * std::cos(ang) + xh[i] * std::sin(ang);
      }
      for (int i = rot; i < hd; ++i) {
        want[h * hd + i] = xh[i];
        ASSERT_EQ(y[h * hd + i], xh[i]) << "pass-through dim " << i << " changed";
      }
      for (int i = 0; i < rot; ++i) {
        n_in += double(xh[i]) * xh[i];
        n_out += double(y[h * hd + i]) * y[h * hd + i];
      }
      EXPECT_NEAR(n_out, n_in, 1e-5 * n_in) << "head " << h << " pos " << pos;
    }
    // fp32 cos/sin of an argument up to ~2.6e5 rad: the argument is exact (it is the fp32 angle),
    // so the error is a few ulps of the outputs.
    expect_close(fmt::format("rope pos={}", pos), y.data(), want.data(), want.size(), 4e-7, 8 * kU);
  }
}

// ---------------------------------------------------------------------------------------------

void check_attention(int T, int heads, int kv_heads, int hd, uint32_t seed) {
  std::mt19937 rng(seed);
  auto q = random_vec(rng, size_t(heads * hd), 0.05f, 2.0f);
  auto kc = random_vec(rng, size_t(T * kv_heads * hd), 0.05f, 2.0f);
  auto vc = random_vec(rng, size_t(T * kv_heads * hd), 0.05f, 2.0f);
  std::vector<float> out(size_t(heads * hd));
  attention_decode(q.data(), kc.data(), vc.data(), T, heads, kv_heads, hd, out.data());
  std::vector<double> want(out.size());
  for (int h = 0; h < heads; ++h) {
    const int kvh = h / (heads / kv_heads);
    std::vector<double> s(T);
    double mx = -INFINITY, sum = 0;
    for (int t = 0; t < T; ++t) {
      double d = 0;
      for (int i = 0; i < hd; ++i) d += double(q[h * hd + i]) * kc[size_t((t * kv_heads + kvh) * hd + i)];
      s[t] = d / std::sqrt(double(hd));
      mx = std::max(mx, s[t]);
    }
    for (auto& x : s) { x = std::exp(x - mx); sum += x; }
    for (int i = 0; i < hd; ++i) {
      double o = 0;
      for (int t = 0; t < T; ++t) o += s[t] / sum * vc[size_t((t * kv_heads + kvh) * hd + i)];
      want[size_t(h * hd + i)] = o;
    }
  }
  // Scores carry hd-term fp32 dot error (|s| up to ~hd*4/sqrt(hd)), which exp turns into a relative
  // error of the weights; outputs are convex combinations of |v| <= 2.
  const double atol = 2.0 * (hd + T + 8) * kU * 4.0 * std::sqrt(double(hd));
  expect_close(fmt::format("attention T={} heads={} kv={} hd={}", T, heads, kv_heads, hd), out.data(), want.data(),
               want.size(), atol, 0.0);
}

TEST(HostAttention, DecodeMatchesNaiveGqa) {
  check_attention(1, 4, 2, 32, 40);
  check_attention(37, 8, 2, 40, 41);
  check_attention(300, 16, 2, 64, 42);  // runs heads in parallel
  check_attention(19, 6, 6, 24, 43);    // MHA
}

TEST(HostAttention, SinglePositionReturnsValue) {
  std::mt19937 rng(44);
  const int heads = 4, kv = 2, hd = 16;
  auto q = random_vec(rng, heads * hd), k = random_vec(rng, kv * hd), v = random_vec(rng, kv * hd);
  std::vector<float> out(heads * hd);
  attention_decode(q.data(), k.data(), v.data(), 1, heads, kv, hd, out.data());
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < hd; ++i) ASSERT_EQ(out[h * hd + i], v[(h / 2) * hd + i]) << "head " << h << " dim " << i;
}

// ---------------------------------------------------------------------------------------------

TEST(HostMoe, RouterPicksLargestAndRenormalises) {
  std::mt19937 rng(50);
  const int E = 64, k = 8;
  auto logits = random_vec(rng, E, 0.05f, 4.0f);
  std::vector<int> idx(k);
  std::vector<float> w(k);
  router_top_k(logits.data(), E, k, idx.data(), w.data());
  std::vector<int> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  double top = 0;
  for (int i = 0; i < k; ++i) top += std::exp(double(logits[order[i]]));
  float total = 0;
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(idx[i], order[i]) << "rank " << i;
    EXPECT_NEAR(w[i], std::exp(double(logits[order[i]])) / top, 8 * kU) << "rank " << i;
    total += w[i];
  }
  EXPECT_NEAR(total, 1.0f, 4 * kU * k);
}

TEST(HostMoe, RouterTiesGoToLowerIndex) {
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f, 2.0f, 1.0f, -1.0f, 2.0f};
  int idx[4];
  float w[4];
  router_top_k(logits.data(), int(logits.size()), 4, idx, w);
  EXPECT_EQ(idx[0], 1);
  EXPECT_EQ(idx[1], 3);
  EXPECT_EQ(idx[2], 6);
  EXPECT_EQ(idx[3], 2);
  EXPECT_EQ(w[0], w[1]);
  // k == E keeps everything and is plain softmax.
  std::vector<int> all(logits.size());
  std::vector<float> wa(logits.size());
  router_top_k(logits.data(), int(logits.size()), int(logits.size()), all.data(), wa.data());
  std::set<int> seen(all.begin(), all.end());
  EXPECT_EQ(seen.size(), logits.size());
}

TEST(HostMoe, Swiglu) {
  std::mt19937 rng(51);
  const int n = 45;
  auto g = random_vec(rng, n, 0.05f, 6.0f), u = random_vec(rng, n, 0.05f, 2.0f);
  std::vector<float> out(n);
  swiglu(g.data(), u.data(), n, out.data());
  std::vector<double> want(n);
  for (int i = 0; i < n; ++i) want[i] = silu_d(g[i]) * u[i];
  expect_close("swiglu", out.data(), want.data(), n, 0.0, 8 * kU);
}

// ---------------------------------------------------------------------------------------------

struct Sampler {
  std::vector<float> logits, scratch;
  std::vector<int32_t> idx;
  explicit Sampler(std::vector<float> l) : logits(std::move(l)), scratch(logits.size()), idx(logits.size()) {}
  int32_t operator()(SamplingKnobs k, uint64_t counter) {
    k.counter = counter;
    return sample(logits.data(), int(logits.size()), k, scratch.data(), idx.data());
  }
};

std::vector<double> softmax_d(const std::vector<float>& l, double temperature) {
  std::vector<double> p(l.size());
  double mx = *std::max_element(l.begin(), l.end()), s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp((l[i] - mx) / temperature);
  for (auto& x : p) x /= s;
  return p;
}

TEST(HostSample, ArgmaxLowestIndexOnTies) {
  const std::vector<float> l = {0.1f, 3.0f, -2.0f, 3.0f, 2.9f};
  EXPECT_EQ(argmax(l.data(), int(l.size())), 1);
  EXPECT_EQ(argmax(l.data(), 1), 0);
}

TEST(HostSample, TemperatureZeroAndTopKOneAreArgmax) {
  std::mt19937 rng(60);
  Sampler s(random_vec(rng, 1000, 0.05f, 3.0f));
  const int32_t best = argmax(s.logits.data(), 1000);
  for (uint64_t c = 0; c < 200; ++c) {
    ASSERT_EQ(s({.temperature = 0.0f, .seed = 9}, c), best);
    ASSERT_EQ(s({.temperature = 1.5f, .top_k = 1, .seed = 9}, c), best);
    ASSERT_EQ(s({.temperature = 1.0f, .top_p = 1e-6f, .seed = 9}, c), best);
  }
}

TEST(HostSample, SameSeedAndCounterSameToken) {
  std::mt19937 rng(61);
  Sampler a(random_vec(rng, 500, 0.05f, 1.0f));
  Sampler b(a.logits);
  std::fill(b.scratch.begin(), b.scratch.end(), 123.0f);  // scratch contents must not matter
  std::set<int32_t> distinct;
  for (uint64_t c = 0; c < 300; ++c) {
    const SamplingKnobs p{.temperature = 0.9f, .top_p = 0.95f, .top_k = 200, .seed = 77};
    const int32_t t = a(p, c);
    ASSERT_EQ(t, b(p, c)) << "counter " << c;
    ASSERT_EQ(t, a(p, c)) << "counter " << c;
    distinct.insert(t);
  }
  // A flat-ish distribution over 200 tokens: 300 counters must land on many of them.
  EXPECT_GT(distinct.size(), 100u);
  // Different seeds give a different sequence.
  int same = 0;
  for (uint64_t c = 0; c < 100; ++c) same += a({.seed = 1}, c) == a({.seed = 2}, c);
  EXPECT_LT(same, 10);
}

TEST(HostSample, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> l = {1.0f, 0.2f, -0.5f, 2.0f, 0.7f, -1.5f, 1.3f, 0.0f};
  Sampler s(l);
  const int draws = 20000;
  for (float temperature : {1.0f, 0.7f}) {
    std::vector<int> count(l.size(), 0);
    for (int c = 0; c < draws; ++c) ++count[size_t(s({.temperature = temperature, .seed = 3}, uint64_t(c)))];
    const auto p = softmax_d(l, temperature);
    for (size_t i = 0; i < l.size(); ++i)  // 1% absolute is >= 3.4 standard deviations for any p here
      EXPECT_NEAR(double(count[i]) / draws, p[i], 0.01) << "token " << i << " T=" << temperature;
  }
  // top_k = 3 renormalises over the three most likely tokens (3, 6, 0).
  std::vector<int> count(l.size(), 0);
  for (int c = 0; c < draws; ++c) ++count[size_t(s({.top_k = 3, .seed = 4}, uint64_t(c)))];
  const double z = std::exp(2.0) + std::exp(1.3) + std::exp(1.0);
  EXPECT_NEAR(count[3] / double(draws), std::exp(2.0) / z, 0.01);
  EXPECT_NEAR(count[6] / double(draws), std::exp(1.3) / z, 0.01);
  EXPECT_NEAR(count[0] / double(draws), std::exp(1.0) / z, 0.01);
  EXPECT_EQ(count[3] + count[6] + count[0], draws);
}

TEST(HostSample, TopPKeepsSmallestPrefixReachingMass) {
  // Flat-ish distribution over 3000 tokens: the top_p prefix is far longer than the first partial
  // sort, exercising the growth path. Every draw must come from the reference prefix.
  std::mt19937 rng(62);
  Sampler s(random_vec(rng, 3000, 0.05f, 0.5f));
  const float top_p = 0.8f;
  const auto p = softmax_d(s.logits, 1.0);
  std::vector<int> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  double cum = 0;
  std::set<int> prefix;
  for (int i : order) {
    prefix.insert(i);
    cum += p[i];
    if (cum >= top_p) break;
  }
  ASSERT_GT(prefix.size(), 1000u);
  std::set<int> drawn;
  for (uint64_t c = 0; c < 2000; ++c) {
    const int32_t t = s({.top_p = top_p, .seed = 5}, c);
    ASSERT_TRUE(prefix.count(t)) << "token " << t << " outside the top-p prefix, counter " << c;
    drawn.insert(t);
  }
  EXPECT_GT(drawn.size(), prefix.size() / 3);
}

// The adjust phase on a hand-computed row: logits {2, 1, -1, 0.5, 3}, token 0 drawn twice and token 2
// once so far, token 3 in the prompt, token 4 biased by -1; presence 0.5, frequency 0.25, repetition 2:
//   t0  2 / 2 (repeated, positive) - 0.25·2 - 0.5  = 0
//   t1  1 (never seen)                               = 1
//   t2  -1 · 2 (repeated, negative) - 0.25 - 0.5     = -2.75
//   t3  0.5 / 2 (prompt only: no frequency/presence) = 0.25
//   t4  3 - 1 (bias, then never seen)                = 2
// every value exact in fp32, and sampling at T = 1 follows their softmax.
TEST(HostSample, PenaltiesAndBiasChangeTheDistributionAsSpecified) {
  const std::vector<float> l = {2.0f, 1.0f, -1.0f, 0.5f, 3.0f};
  const std::vector<int32_t> counts = {2, 0, 1, 0, 0};
  const std::vector<uint32_t> prompt = {1u << 3};
  const std::vector<LogitBias> bias = {{.token = 4, .bias = -1.0f}};
  const SamplingHistory h{.counts = counts.data(), .prompt = prompt.data(), .bias = bias.data()};
  const SamplingKnobs k{.seed = 11, .presence_penalty = 0.5f, .frequency_penalty = 0.25f, .repetition_penalty = 2.0f,
                        .logit_bias = 1, .history = 0};
  std::vector<float> out(l.size());
  adjust_logits(l.data(), int(l.size()), k, h, out.data());
  EXPECT_EQ(out, (std::vector<float>{0.0f, 1.0f, -2.75f, 0.25f, 2.0f}));
  // Without a history the same knobs change nothing.
  SamplingKnobs none = k;
  none.history = -1;
  adjust_logits(l.data(), int(l.size()), none, h, out.data());
  EXPECT_EQ(out, l);

  std::vector<float> scratch(l.size());
  std::vector<int32_t> idx(l.size());
  const int draws = 20000;
  std::vector<int> count(l.size(), 0);
  SamplingKnobs d = k;
  for (int c = 0; c < draws; ++c) {
    d.counter = uint64_t(c);
    ++count[size_t(sample(l.data(), int(l.size()), d, scratch.data(), idx.data(), h))];
  }
  const auto p = softmax_d({0.0f, 1.0f, -2.75f, 0.25f, 2.0f}, 1.0);
  for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(double(count[i]) / draws, p[i], 0.01) << "token " << i;
  // Greedy takes the adjusted argmax (token 4), not the raw one... until the bias is larger.
  d.temperature = 0.0f;
  EXPECT_EQ(sample(l.data(), int(l.size()), d, scratch.data(), idx.data(), h), 4);
  const std::vector<LogitBias> big = {{.token = 4, .bias = -2.5f}};
  EXPECT_EQ(sample(l.data(), int(l.size()), d, scratch.data(), idx.data(), {h.counts, h.prompt, big.data()}), 1);
}

TEST(HostSample, LogitBiasMinus100BansAndPlus100Forces) {
  std::mt19937 rng(63);
  Sampler s(random_vec(rng, 2000, 0.05f, 3.0f));
  const int32_t best = argmax(s.logits.data(), 2000);
  const std::vector<int32_t> counts(2000, 0);
  const std::vector<uint32_t> prompt(size_t(history_prompt_words(2000)), 0u);
  for (const float temperature : {0.0f, 1.0f, 2.0f}) {
    const std::vector<LogitBias> ban = {{.token = best, .bias = -100.0f}};
    const std::vector<LogitBias> force = {{.token = 1234, .bias = 100.0f}};
    SamplingKnobs k{.temperature = temperature, .seed = 5, .logit_bias = 1, .history = 0};
    for (uint64_t c = 0; c < 500; ++c) {
      k.counter = c;
      ASSERT_NE(sample(s.logits.data(), 2000, k, s.scratch.data(), s.idx.data(), {counts.data(), prompt.data(), ban.data()}),
                best) << "T " << temperature << " counter " << c;
      ASSERT_EQ(sample(s.logits.data(), 2000, k, s.scratch.data(), s.idx.data(), {counts.data(), prompt.data(), force.data()}),
                1234) << "T " << temperature << " counter " << c;
    }
  }
}

// min_p keeps tokens whose probability is at least min_p of the largest's: over e = {1, .5, .1, .04},
// min_p 0.2 keeps the first two, renormalised to 2/3 and 1/3.
TEST(HostSample, MinPDropsTokensBelowAFractionOfTheLargest) {
  Sampler s({0.0f, std::log(0.5f), std::log(0.1f), std::log(0.04f)});
  std::vector<int> count(4, 0);
  const int draws = 20000;
  for (int c = 0; c < draws; ++c) ++count[size_t(s({.min_p = 0.2f, .seed = 6}, uint64_t(c)))];
  EXPECT_EQ(count[2] + count[3], 0);
  EXPECT_NEAR(count[0] / double(draws), 2.0 / 3.0, 0.01);
  EXPECT_NEAR(count[1] / double(draws), 1.0 / 3.0, 0.01);
  // With top-k and top-p, as with neither: min_p = 1 is greedy.
  for (uint64_t c = 0; c < 200; ++c) {
    ASSERT_EQ(s({.temperature = 1.5f, .min_p = 1.0f, .seed = 7}, c), 0);
    ASSERT_EQ(s({.temperature = 1.5f, .top_p = 0.99f, .top_k = 3, .min_p = 1.0f, .seed = 7}, c), 0);
  }
}

}  // namespace
}  // namespace rocket::host
