// GPU check + benchmark for the residual-stream kernels: the embedding gather
// (src/kernels/cuda/embedding.cuh), the zero-centred RMSNorm with and without the fused residual
// add of one or two sub-layer outputs (src/kernels/cuda/rms_norm.cuh), and the MoE entry's norm fused
// with the router projection (src/kernels/cuda/norm_router.cuh). Runs on the H200 machine (CI only compiles it): a3b and tiny
// shapes at buckets 1, 8, 32, random data, poisoned outputs, every output compared against the host
// kernels; times each kernel against a device copy measured in the same run. Exit 1 on a mismatch.
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/norm_router.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/host/norm.h"
#include "check_support.h"

using namespace rocket;
using check::DeviceBuffer;

namespace {

constexpr float kEps = 1e-6f;

// The embedding is a copy: bitwise equality with the table's row, the host engine's dequantised
// row rounded back to bf16 (exact, the table is bf16).
template <int kHidden, int B>
bool run_embedding(const char* name, int vocab, double copy, std::mt19937& rng) {
  std::vector<uint16_t> table(size_t(vocab) * kHidden);
  uint64_t z = rng();
  for (auto& t : table) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    t = uint16_t(z >> 48) & 0xbfff;  // clear the top exponent bit: finite values only
  }
  std::vector<int32_t> ids(B);
  for (auto& id : ids) id = int32_t(rng() % uint32_t(vocab));  // distinct per row in practice
  DeviceBuffer<uint16_t> dt(table);
  DeviceBuffer<int32_t> di(ids);
  DeviceBuffer<uint16_t> dx(size_t(B) * kHidden);
  cuda::EmbeddingParams p{.table = reinterpret_cast<const __nv_bfloat16*>(dt.ptr), .ids = di.ptr,
                          .x = reinterpret_cast<__nv_bfloat16*>(dx.ptr)};
  cuda::embedding<kHidden>(p, B, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> x = dx.download();
  long bad = -1;
  for (int i = 0; i < B && bad < 0; ++i)
    for (int c = 0; c < kHidden; ++c)
      if (x[size_t(i) * kHidden + c] != table[size_t(ids[i]) * kHidden + c]) { bad = long(i) * kHidden + c; break; }
  const double us = check::time_us([&] { cuda::embedding<kHidden>(p, B, nullptr); });
  check::report(name, B, us, 2.0 * B * kHidden * 2, copy, bad < 0 ? 0.0 : 1.0, bad < 0);
  if (bad >= 0) std::printf("  first mismatch at row %ld col %ld\n", bad / kHidden, bad % kHidden);
  return bad < 0;
}

// Norms: the host kernel on the same bf16 inputs (for the fused form, on the residual rounded to bf16
// as the device stores it), compared in bf16 ulps (check_support.h). The fp32 part: mean(x²) summed
// in another order is off by at most kDim unit roundoffs relative, and the result by half that.
template <int kDim, int B, bool kFused, bool kTwoDeltas = false>
bool run_norm(const char* name, double copy, std::mt19937& rng) {
  const size_t n = size_t(B) * kDim;
  const check::Bf16Data x = check::random_bf16(n, -2.0f, 2.0f, rng);
  const check::Bf16Data d = check::random_bf16(n, -1.0f, 1.0f, rng);
  const check::Bf16Data d2 = check::random_bf16(n, -1.0f, 1.0f, rng);
  const check::Bf16Data w = check::random_bf16(kDim, -0.5f, 0.5f, rng);
  DeviceBuffer<uint16_t> dx(x.bits), dd(d.bits), dd2(d2.bits), dw(w.bits), dy(n);
  DeviceBuffer<uint16_t> dr(n);
  const auto bf = [](auto* q) { return reinterpret_cast<__nv_bfloat16*>(q); };
  cuda::RmsNormParams p{.x = bf(dx.ptr), .delta = kFused ? bf(dd.ptr) : nullptr, .delta2 = kTwoDeltas ? bf(dd2.ptr) : nullptr,
                        .residual = kFused ? bf(dr.ptr) : nullptr, .w = bf(dw.ptr), .y = bf(dy.ptr), .eps = kEps};
  const auto launch = [&] {
    if constexpr (kFused) cuda::add_rms_norm<kDim>(p, B, nullptr);
    else cuda::rms_norm<kDim>(p, B, nullptr);
  };
  launch();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> y = check::bf16_to_f32(dy.download());
  const std::vector<uint16_t> r = dr.download();
  std::vector<float> in(n), ref(n);
  long bad = -1;
  // The residual each sum rounded to bf16 (an fp32 add of two bf16 with one rounding: exact on both).
  const auto residual = [&](size_t i) {
    const uint16_t sum = f32_to_bf16(x.f[i] + d.f[i]);
    return kTwoDeltas ? f32_to_bf16(bf16_to_f32(sum) + d2.f[i]) : sum;
  };
  for (size_t i = 0; i < n; ++i) {
    if (!kFused) { in[i] = x.f[i]; continue; }
    const uint16_t sum = residual(i);
    in[i] = bf16_to_f32(sum);
    if (r[i] != sum && bad < 0) bad = long(i);
  }
  double worst = 0;
  for (int i = 0; i < B; ++i) {
    host::rms_norm_zero_centred(in.data() + size_t(i) * kDim, w.bits.data(), kDim, kEps, ref.data() + size_t(i) * kDim);
    for (int c = 0; c < kDim; ++c) {
      const size_t at = size_t(i) * kDim + c;
      const double ulps = check::bf16_error_ulps(y[at], ref[at], std::fabs(ref[at]) * kDim * 5.96e-8f);
      worst = std::max(worst, ulps);
      if (!(ulps <= 1.0) && bad < 0) bad = long(at);
    }
  }
  const double us = check::time_us(launch);
  check::report(name, B, us, double(n) * 2 * (kFused ? (kTwoDeltas ? 5 : 4) : 2) + kDim * 2, copy, worst, bad < 0);
  if (bad >= 0)
    std::printf("  first mismatch at row %ld col %ld: gpu %.7g host %.7g (residual %s)\n", bad / kDim, bad % kDim,
                y[bad], ref[bad], kFused && r[bad] != residual(size_t(bad)) ? "differs" : "ok");
  return bad < 0;
}

// The MoE entry: hn as run_norm checks it (the norm of x + delta rounded to bf16), x left as it was,
// and each logit against the same sum in double over the device's hn, within the fp32 bound for a
// kDim-term sum (kDim unit roundoffs of the sum of |terms|).
template <int kDim, int kExperts, int B>
bool run_norm_router(const char* name, double copy, std::mt19937& rng) {
  const size_t n = size_t(B) * kDim;
  const check::Bf16Data x = check::random_bf16(n, -2.0f, 2.0f, rng);
  const check::Bf16Data d = check::random_bf16(n, -1.0f, 1.0f, rng);
  const check::Bf16Data w = check::random_bf16(kDim, -0.5f, 0.5f, rng);
  const check::Bf16Data router = check::random_bf16(size_t(kExperts) * kDim, -0.05f, 0.05f, rng);
  DeviceBuffer<uint16_t> dx(x.bits), dd(d.bits), dw(w.bits), drouter(router.bits), dy(n);
  DeviceBuffer<float> dl(size_t(B) * kExperts);
  const auto bf = [](auto* q) { return reinterpret_cast<__nv_bfloat16*>(q); };
  const cuda::NormRouterParams p{.norm = {.x = bf(dx.ptr), .delta = bf(dd.ptr), .w = bf(dw.ptr), .y = bf(dy.ptr), .eps = kEps},
                                 .router = bf(drouter.ptr),
                                 .logits = dl.ptr};
  const auto launch = [&] { cuda::norm_router<kDim, kExperts>(p, B, nullptr); };
  launch();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> y = check::bf16_to_f32(dy.download());
  const std::vector<float> logits = dl.download();
  long bad = -1;
  const char* what = "";
  if (dx.download() != x.bits) bad = 0, what = "x was written";
  std::vector<float> in(n), ref(n);
  for (size_t i = 0; i < n; ++i) in[i] = bf16_to_f32(f32_to_bf16(x.f[i] + d.f[i]));
  double worst = 0;
  for (int i = 0; i < B; ++i) {
    host::rms_norm_zero_centred(in.data() + size_t(i) * kDim, w.bits.data(), kDim, kEps, ref.data() + size_t(i) * kDim);
    for (int c = 0; c < kDim; ++c) {
      const size_t at = size_t(i) * kDim + c;
      const double ulps = check::bf16_error_ulps(y[at], ref[at], std::fabs(ref[at]) * kDim * 5.96e-8f);
      worst = std::max(worst, ulps);
      if (!(ulps <= 1.0) && bad < 0) bad = long(at), what = "hn";
    }
    for (int e = 0; e < kExperts; ++e) {
      double sum = 0, mag = 0;
      for (int c = 0; c < kDim; ++c) {
        const double t = double(y[size_t(i) * kDim + c]) * router.f[size_t(e) * kDim + c];
        sum += t;
        mag += std::fabs(t);
      }
      const double err = std::fabs(double(logits[size_t(i) * kExperts + e]) - sum), tol = mag * kDim * 5.96e-8;
      worst = std::max(worst, err / tol);
      if (!(err <= tol) && bad < 0) bad = long(i) * kExperts + e, what = "logit";
    }
  }
  const double us = check::time_us(launch);
  check::report(name, B, us, double(n) * 2 * 3 + kDim * 2 + double(kExperts) * kDim * 2 + double(B) * kExperts * 4, copy, worst,
                bad < 0);
  if (bad >= 0) std::printf("  first mismatch: %s at %ld\n", what, bad);
  return bad < 0;
}

}  // namespace

int main() {
  try {
    const double copy = check::device_copy_gbps();
    std::printf("device copy (read+write): %.0f GB/s; %% column = achieved / copy; worst in bf16 ulps\n", copy);
    std::mt19937 rng(11);
    bool ok = true;
    ok &= run_embedding<2048, 1>("embedding a3b 248320x2048", 248320, copy, rng);
    ok &= run_embedding<2048, 32>("embedding a3b 248320x2048", 248320, copy, rng);
    ok &= run_embedding<128, 8>("embedding tiny 151936x128", 151936, copy, rng);
    ok &= run_norm<2048, 1, false>("rms_norm a3b 2048", copy, rng);
    ok &= run_norm<2048, 8, false>("rms_norm a3b 2048", copy, rng);
    ok &= run_norm<2048, 32, false>("rms_norm a3b 2048", copy, rng);
    ok &= run_norm<2048, 1, true>("add_rms_norm a3b 2048", copy, rng);
    ok &= run_norm<2048, 8, true>("add_rms_norm a3b 2048", copy, rng);
    ok &= run_norm<2048, 32, true>("add_rms_norm a3b 2048", copy, rng);
    ok &= run_norm<128, 8, false>("rms_norm tiny 128", copy, rng);
    ok &= run_norm<128, 32, true>("add_rms_norm tiny 128", copy, rng);
    ok &= run_norm<2048, 16, true, true>("add_rms_norm a3b 2 deltas", copy, rng);
    ok &= run_norm<128, 8, true, true>("add_rms_norm tiny 2 deltas", copy, rng);
    ok &= run_norm_router<2048, 256, 1>("norm_router a3b 256 experts", copy, rng);
    ok &= run_norm_router<2048, 256, 16>("norm_router a3b 256 experts", copy, rng);
    ok &= run_norm_router<2048, 256, 32>("norm_router a3b 256 experts", copy, rng);
    ok &= run_norm_router<128, 16, 8>("norm_router tiny 16 experts", copy, rng);
    std::printf("rms_norm check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "rms_norm_check: %s\n", e.what());
    return 1;
  }
}
