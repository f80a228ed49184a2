// GPU check + benchmark for the residual-stream kernels: the embedding gather
// (src/kernels/cuda/embedding.cuh) and the zero-centred RMSNorm with and without the fused residual
// add (src/kernels/cuda/rms_norm.cuh). Runs on the H200 machine (CI only compiles it): a3b and tiny
// shapes at buckets 1, 8, 32, random data, poisoned outputs, every output compared against the host
// kernels; times each kernel against a device copy measured in the same run. Exit 1 on a mismatch.
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/host/rms_norm.h"
#include "check_support.h"

using namespace rocket;
using check::DeviceBuffer;

namespace {

constexpr float kEps = 1e-6f;

// The embedding is a copy: bitwise equality with the table's row, the host engine's dequantised
// row rounded back to bf16 (exact, the table is bf16). kMapped: as a decode step runs it, ids read
// from mapped pinned host memory and a block of step inputs copied from there to the device.
template <int kHidden, int B, bool kMapped = false>
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
  // The engine's step inputs are 88 vectors at 32 rows; an odd count covers a partial last pass.
  constexpr int kInputVectors = 91;
  std::vector<uint32_t> inputs(kInputVectors * 4);
  for (auto& v : inputs) v = uint32_t(rng());
  DeviceBuffer<uint32_t> landed(inputs.size());
  uint32_t* pinned = nullptr;
  if (kMapped) {
    CUDA_CHECK(cudaHostAlloc(&pinned, (inputs.size() + B) * 4, cudaHostAllocMapped));
    std::copy(inputs.begin(), inputs.end(), pinned);
    std::copy(ids.begin(), ids.end(), reinterpret_cast<int32_t*>(pinned + inputs.size()));
    p.ids = reinterpret_cast<const int32_t*>(pinned + inputs.size());
    p.inputs_from = reinterpret_cast<const uint4*>(pinned);
    p.inputs_to = reinterpret_cast<uint4*>(landed.ptr);
    p.input_vectors = kInputVectors;
  }
  cuda::embedding<kHidden>(p, B, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> x = dx.download();
  long bad = -1;
  for (int i = 0; i < B && bad < 0; ++i)
    for (int c = 0; c < kHidden; ++c)
      if (x[size_t(i) * kHidden + c] != table[size_t(ids[i]) * kHidden + c]) { bad = long(i) * kHidden + c; break; }
  if (kMapped && landed.download() != inputs) {
    std::printf("  the step inputs landed on the device differ from the pinned staging\n");
    bad = bad < 0 ? 0 : bad;
  }
  const double us = check::time_us([&] { cuda::embedding<kHidden>(p, B, nullptr); });
  if (pinned) CUDA_CHECK(cudaFreeHost(pinned));
  check::report(name, B, us, 2.0 * B * kHidden * 2, copy, bad < 0 ? 0.0 : 1.0, bad < 0);
  if (bad >= 0) std::printf("  first mismatch at row %ld col %ld\n", bad / kHidden, bad % kHidden);
  return bad < 0;
}

// Norms: the host kernel on the same bf16 inputs (for the fused form, on the residual rounded to bf16
// as the device stores it), compared in bf16 ulps (check_support.h). The fp32 part: mean(x²) summed
// in another order is off by at most kDim unit roundoffs relative, and the result by half that.
template <int kDim, int B, bool kFused>
bool run_norm(const char* name, double copy, std::mt19937& rng) {
  const size_t n = size_t(B) * kDim;
  const check::Bf16Data x = check::random_bf16(n, -2.0f, 2.0f, rng);
  const check::Bf16Data d = check::random_bf16(n, -1.0f, 1.0f, rng);
  const check::Bf16Data w = check::random_bf16(kDim, -0.5f, 0.5f, rng);
  DeviceBuffer<uint16_t> dx(x.bits), dd(d.bits), dw(w.bits), dy(n);
  DeviceBuffer<uint16_t> dr(n);
  const auto bf = [](auto* q) { return reinterpret_cast<__nv_bfloat16*>(q); };
  cuda::RmsNormParams p{.x = bf(dx.ptr), .delta = kFused ? bf(dd.ptr) : nullptr, .residual = kFused ? bf(dr.ptr) : nullptr,
                        .w = bf(dw.ptr), .y = bf(dy.ptr), .eps = kEps};
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
  for (size_t i = 0; i < n; ++i) {
    if (!kFused) { in[i] = x.f[i]; continue; }
    const uint16_t sum = f32_to_bf16(x.f[i] + d.f[i]);  // fp32 add of two bf16, one rounding: exact on both
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
  check::report(name, B, us, double(n) * 2 * (kFused ? 4 : 2) + kDim * 2, copy, worst, bad < 0);
  if (bad >= 0)
    std::printf("  first mismatch at row %ld col %ld: gpu %.7g host %.7g (residual %s)\n", bad / kDim, bad % kDim,
                y[bad], ref[bad], kFused && r[bad] != f32_to_bf16(x.f[bad] + d.f[bad]) ? "differs" : "ok");
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
    ok &= run_embedding<2048, 16, true>("embedding a3b, mapped inputs", 248320, copy, rng);
    ok &= run_embedding<128, 8>("embedding tiny 151936x128", 151936, copy, rng);
    ok &= run_norm<2048, 1, false>("rms_norm a3b 2048", copy, rng);
    ok &= run_norm<2048, 8, false>("rms_norm a3b 2048", copy, rng);
    ok &= run_norm<2048, 32, false>("rms_norm a3b 2048", copy, rng);
    ok &= run_norm<2048, 1, true>("add_rms_norm a3b 2048", copy, rng);
    ok &= run_norm<2048, 8, true>("add_rms_norm a3b 2048", copy, rng);
    ok &= run_norm<2048, 32, true>("add_rms_norm a3b 2048", copy, rng);
    ok &= run_norm<128, 8, false>("rms_norm tiny 128", copy, rng);
    ok &= run_norm<128, 32, true>("add_rms_norm tiny 128", copy, rng);
    std::printf("rms_norm check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "rms_norm_check: %s\n", e.what());
    return 1;
  }
}
