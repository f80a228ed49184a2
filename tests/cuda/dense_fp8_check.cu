// GPU check + benchmark for the dense projection with block-FP8 weights (src/kernels/cuda/dense.cuh at
// Precision::kFP8Block: e4m3 [N][K] and one fp32 scale per 128 x 128 block, the `-FP8` releases' form).
// Runs on the H200 machine only. For the a3b dense shapes a `-FP8` release stores in FP8 (attention and
// GDN projections, the shared expert), single and grouped, at buckets 1, 8, 16, 64, with random e4m3
// weights (every finite code), random block scales and random bf16 activations:
//   - the output (poisoned with NaN before the launch) is compared with the exact sum
//     sum_k scale(n, k) * e4m3(n, k) * x(b, k), computed in double on the host, within a bound derived
//     below (the weights' bf16 rounding included), at rows = B and at a partial rows; rows past `rows`
//     must still hold the poison;
//   - a CUDA-graph replay must reproduce the direct launch bit for bit;
//   - the launch is timed as a graph of many launches over enough weight copies that they come from HBM,
//     against a device-to-device copy measured in the same run (bytes = e4m3 weights + scales + x + y).
// Exit 1 on any mismatch.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "check_support.h"
#include "core/dtype.h"
#include "kernels/cuda/dense.cuh"

using namespace rocket;
using bf16 = __nv_bfloat16;
constexpr Precision kFp8 = Precision::kFP8Block;

namespace {

constexpr uint64_t kRotateBytes = uint64_t(128) << 20;  // weight bytes a timed graph cycles through: > 2x L2
constexpr int kMinTimedLaunches = 64;
constexpr uint64_t kCopyAlign = 65536;  // weight copies for timing: 64 KiB-aligned, like blob tensors

// One projection's FP8 weights: host bytes and scales, and `copies` device copies of both.
struct Fp8Weights {
  int n = 0, k = 0;
  std::vector<uint8_t> w;      // [n][k] e4m3, never a NaN code
  std::vector<float> scale;    // [ceil(n / 128)][ceil(k / 128)]
  uint8_t* dev = nullptr;      // copy c: weights at c * stride, scales after them
  uint64_t stride = 0, scale_at = 0;
  int copies = 0;
  int scale_cols() const { return (k + 127) / 128; }
  const uint8_t* weights(int c) const { return dev + uint64_t(c) * stride; }
  const float* scales(int c) const { return reinterpret_cast<const float*>(dev + uint64_t(c) * stride + scale_at); }
  float value(int r, int c) const { return e4m3_to_f32(w[size_t(r) * k + c]) * scale[(r / 128) * scale_cols() + c / 128]; }
};

Fp8Weights make_weights(int n, int k, uint64_t seed, int copies = 0) {
  Fp8Weights f;
  f.n = n;
  f.k = k;
  std::mt19937_64 rng(seed);
  f.w.resize(size_t(n) * k);
  for (uint8_t& b : f.w) {
    b = uint8_t(rng());
    if ((b & 0x7f) == 0x7f) b &= 0x80;  // NaN codes become (signed) zero
  }
  // Scales of real `-FP8` checkpoints: about max|w| / 448, so ~1e-5 .. 1e-3.
  std::uniform_real_distribution<float> u(std::log(1e-5f), std::log(1e-3f));
  f.scale.resize(size_t((n + 127) / 128) * f.scale_cols());
  for (float& s : f.scale) s = std::exp(u(rng));
  // The kernel reads whole 16-row tiles: rows past n in a copy hold 0xff (e4m3 NaN), which must not
  // reach a real output.
  const uint64_t wbytes = uint64_t((n + 15) / 16) * 16 * k;
  f.scale_at = (wbytes + 255) / 256 * 256;
  f.stride = (f.scale_at + f.scale.size() * 4 + kCopyAlign - 1) / kCopyAlign * kCopyAlign;
  f.copies = copies > 0 ? copies : int(std::max<uint64_t>(1, (kRotateBytes + f.stride - 1) / f.stride));
  CUDA_CHECK(cudaMalloc(&f.dev, f.stride * f.copies));
  CUDA_CHECK(cudaMemset(f.dev, 0xff, f.stride));
  CUDA_CHECK(cudaMemcpy(f.dev, f.w.data(), f.w.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(f.dev + f.scale_at, f.scale.data(), f.scale.size() * 4, cudaMemcpyHostToDevice));
  for (int c = 1; c < f.copies; ++c) CUDA_CHECK(cudaMemcpy(f.dev + c * f.stride, f.dev, f.stride, cudaMemcpyDeviceToDevice));
  return f;
}

// The exact products' sum y[b][n] and S[b][n] = sum_k |w x| (double: every product and the sum exact
// enough to serve as the truth).
struct Reference {
  std::vector<double> y, abs_sum;
};
Reference reference(const Fp8Weights& f, const std::vector<float>& x, int rows) {
  Reference r{std::vector<double>(size_t(rows) * f.n), std::vector<double>(size_t(rows) * f.n)};
  check::parallel_for(f.n, [&](int64_t n0, int64_t n1) {
    std::vector<double> wrow(f.k);
    for (int64_t n = n0; n < n1; ++n) {
      for (int c = 0; c < f.k; ++c) wrow[c] = f.value(int(n), c);
      for (int b = 0; b < rows; ++b) {
        double s = 0, a = 0;
        for (int c = 0; c < f.k; ++c) {
          const double p = wrow[c] * double(x[size_t(b) * f.k + c]);
          s += p;
          a += std::fabs(p);
        }
        r.y[size_t(b) * f.n + n] = s;
        r.abs_sum[size_t(b) * f.n + n] = a;
      }
    }
  });
  return r;
}

// Error bound per output relative to S = sum_k |w_k x_k|. The kernel multiplies each weight as
// bf16(e4m3 * scale) (fp8.cuh): half a bf16 ulp, at most 2^-9 of the weight. Those products are exact in
// fp32; the GPU adds 16 into its accumulator per mma k16 step and the tensor core aligns the 17 addends
// to the largest and truncates (a few units of 2^-23 of S a step: four counted); then up to 32 warp
// partials are added (2^-24 each).
double gamma(int K) { return 0x1p-9 + (4.0 * K / 16 + 32) * 0x1p-23 + 32 * 0x1p-24; }

template <typename Out>
double as_double(Out v) {
  if constexpr (std::is_same_v<Out, float>) return v;
  else return bf16_to_f32(*reinterpret_cast<const uint16_t*>(&v));
}

// Checks one segment's output y [B][n] at `rows`: within bound, rows past `rows` still poison.
template <typename Out>
bool check_rows(const char* name, int B, int rows, const Fp8Weights& f, const std::vector<float>& x,
                const std::vector<Out>& y, double& worst) {
  constexpr bool kBf16Out = std::is_same_v<Out, bf16>;
  const Reference ref = reference(f, x, rows);
  for (int b = 0; b < rows; ++b)
    for (int n = 0; n < f.n; ++n) {
      const size_t o = size_t(b) * f.n + n;
      const double got = as_double(y[o]), sum_err = gamma(f.k) * ref.abs_sum[o];
      // bf16 outputs: the GPU's fp32 value rounds once, by at most 2^-8 of itself.
      const double bound = (kBf16Out ? 0x1p-8 * (std::fabs(ref.y[o]) + sum_err) : 0.0) + sum_err;
      const double rel = std::fabs(got - ref.y[o]) / bound;
      worst = std::max(worst, std::isnan(rel) ? INFINITY : rel);
      if (!(rel <= 1.0)) {
        std::printf("  %s B=%d rows=%d: first mismatch at row %d col %d: gpu %.8g exact %.8g bound %.3g\n", name, B, rows, b,
                    n, got, ref.y[o], bound);
        return false;
      }
    }
  const auto* bytes = reinterpret_cast<const uint8_t*>(y.data());
  if (std::any_of(bytes + size_t(rows) * f.n * sizeof(Out), bytes + size_t(B) * f.n * sizeof(Out),
                  [](uint8_t v) { return v != 0xff; })) {
    std::printf("  %s B=%d rows=%d: wrote past row %d\n", name, B, rows, rows);
    return false;
  }
  return true;
}

// One group of segments Ns over K (a single projection is the group of one) at bucket B and `rows`
// token rows: correctness, graph replay, and (rows == B) timing.
template <int K, int B, typename Out, int... Ns>
bool run(const char* name, const std::vector<Fp8Weights>& ws, int rows, double copy_gbps, uint64_t seed) {
  constexpr int kS = sizeof...(Ns);
  std::mt19937 rng{uint32_t(seed)};
  const check::Bf16Data x = check::random_bf16(size_t(rows) * K, -4.0f, 4.0f, rng);
  check::DeviceBuffer<uint16_t> dx(x.bits);
  std::vector<check::DeviceBuffer<Out>*> dy;
  cuda::DenseGroupParams<kFp8, K, B, Out, Ns...> p{.x = reinterpret_cast<const bf16*>(dx.ptr), .rows = rows};
  for (int j = 0; j < kS; ++j) {
    dy.push_back(new check::DeviceBuffer<Out>(size_t(B) * ws[j].n));
    p.w[j] = ws[j].weights(0);
    p.scale[j] = ws[j].scales(0);
    p.y[j] = dy[j]->ptr;
  }
  cuda::dense_group(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  bool ok = true;
  double worst = 0;
  std::vector<std::vector<Out>> y;
  for (int j = 0; j < kS; ++j) {
    y.push_back(dy[j]->download());
    ok &= check_rows(name, B, rows, ws[j], x.f, y[j], worst);
  }
  // Graph replay: bit-exact with the direct launch, the untouched rows included.
  const Stream stream;
  cudaStream_t s = stream.get();
  cudaGraph_t g;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cuda::dense_group(p, s);
  CUDA_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge;
  CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
  for (int j = 0; j < kS; ++j) CUDA_CHECK(cudaMemsetAsync(dy[j]->ptr, 0xff, size_t(B) * ws[j].n * sizeof(Out), s));
  CUDA_CHECK(cudaGraphLaunch(ge, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  for (int j = 0; j < kS; ++j)
    if (std::memcmp(dy[j]->download().data(), y[j].data(), y[j].size() * sizeof(Out)) != 0) {
      std::printf("  %s B=%d rows=%d: graph replay differs from the direct launch (segment %d)\n", name, B, rows, j);
      ok = false;
    }
  CUDA_CHECK(cudaGraphExecDestroy(ge));
  CUDA_CHECK(cudaGraphDestroy(g));

  if (rows == B) {
    const int launches = std::max(kMinTimedLaunches, ws[0].copies);
    const double ms = check::graph_time_ms([&](cudaStream_t st) {
      for (int i = 0; i < launches; ++i) {
        auto q = p;
        for (int j = 0; j < kS; ++j) {
          q.w[j] = ws[j].weights(i % ws[j].copies);
          q.scale[j] = ws[j].scales(i % ws[j].copies);
        }
        cuda::dense_group(q, st);
      }
    }, 3);
    double bytes = 2.0 * rows * K;
    for (const Fp8Weights& f : ws) bytes += double(f.n) * f.k + 4.0 * f.scale.size() + double(sizeof(Out)) * rows * f.n;
    char label[96];
    std::snprintf(label, sizeof label, "%s x%d", name, K);
    check::report(label, B, 1e3 * ms / launches, bytes, copy_gbps, worst, ok);
  } else {
    std::printf("%-34s B=%-3d (partial rows %d) worst %.2e %s\n", name, B, rows, worst, ok ? "ok" : "MISMATCH");
  }
  for (auto* d : dy) delete d;
  return ok;
}

// Every listed bucket of one group, rows = B then a partial rows ending inside a group of 8.
template <int K, typename Out, int... Ns, int... Bs>
bool group(const char* name, std::integer_sequence<int, Ns...>, std::integer_sequence<int, Bs...>, double copy, uint64_t seed) {
  constexpr int kN[] = {Ns...};
  uint64_t group_bytes = 0;
  for (int n : kN) group_bytes += uint64_t(n) * K;
  const int copies = int(std::max<uint64_t>(1, (kRotateBytes + group_bytes - 1) / group_bytes));
  std::vector<Fp8Weights> ws;
  for (int j = 0; j < int(sizeof...(Ns)); ++j) ws.push_back(make_weights(kN[j], K, seed * 16 + j, copies));
  bool ok = true;
  uint64_t s = seed;
  ((ok &= run<K, Bs, Out, Ns...>(name, ws, Bs, copy, ++s)), ...);
  ((ok &= Bs < 2 || run<K, Bs, Out, Ns...>(name, ws, std::max(1, 3 * Bs / 4 - 1), copy, ++s)), ...);
  for (Fp8Weights& f : ws) CUDA_CHECK(cudaFree(f.dev));
  return ok;
}

template <int... Ns>
using Group = std::integer_sequence<int, Ns...>;

}  // namespace

int main() {
  try {
    const double copy = check::device_copy_gbps();
    std::printf("device copy (read+write, 1 GiB): %.0f GB/s; %% = achieved / copy; bytes = e4m3 weights + scales + x + "
                "y; timed weights cycle through >= 128 MiB\n",
                copy);
    using Buckets = std::integer_sequence<int, 1, 8, 16, 64>;
    bool ok = true;
    ok &= group<2048, bf16>("a3b q_proj | gdn in_proj_qkv", Group<8192>{}, Buckets{}, copy, 1);
    ok &= group<4096, bf16>("a3b o_proj | gdn out_proj", Group<2048>{}, Buckets{}, copy, 2);
    ok &= group<2048, bf16>("a3b gdn in_proj qkv|z|b|a", Group<8192, 4096, 32, 32>{}, Buckets{}, copy, 3);
    ok &= group<2048, bf16>("a3b attention q|k|v", Group<8192, 512, 512>{}, Buckets{}, copy, 4);
    ok &= group<2048, bf16>("a3b shared gate,up", Group<512>{}, Buckets{}, copy, 5);
    ok &= group<512, bf16>("a3b shared down", Group<2048>{}, Buckets{}, copy, 6);
    // Partial tiles and partial scale blocks inside one launch; fp32 outputs.
    ok &= group<128, bf16>("tiny partial tiles 24|256|1", Group<24, 256, 1>{}, std::integer_sequence<int, 1, 8, 64>{}, copy, 7);
    ok &= group<2048, float>("f32 partial tiles 8|512|40", Group<8, 512, 40>{}, std::integer_sequence<int, 1, 8, 64>{}, copy, 8);
    std::printf("dense fp8 check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "dense_fp8_check: %s\n", e.what());
    return 1;
  }
}
