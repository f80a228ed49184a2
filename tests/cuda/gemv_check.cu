// GPU check + benchmark for the decode GEMV (src/kernels/cuda/gemv.cuh). Runs on the H200 machine
// only (CI compiles it, has no GPU to run it): for a3b shapes and buckets 1/8/32, compares every
// output against the host kernel (host::linear on the same bf16-rounded inputs) and times the kernel
// against a device-to-device copy measured in the same run. Prints a table; exit 1 on a mismatch.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "check_support.h"
#include "core/dtype.h"
#include "kernels/cuda/gemv.cuh"
#include "kernels/host/linear.h"

using namespace rocket;

namespace {

struct Shape {
  const char* name;
  int rows, cols;
  Precision precision;
};

template <int B, Precision P>
bool run(const Shape& s, double copy_gbps, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t n = size_t(s.rows) * s.cols;
  std::vector<uint8_t> w;
  std::vector<uint8_t> sc;
  float scale2 = 1.0f;
  if (P == Precision::kBF16) {
    w.resize(n * 2);
    auto* p = reinterpret_cast<uint16_t*>(w.data());
    for (size_t i = 0; i < n; ++i) p[i] = f32_to_bf16(u(rng) * 0.05f);
  } else {
    w.resize(n / 2);
    sc.resize(n / 16);
    scale2 = 1.0f / 448.0f;
    for (size_t i = 0; i < n / 2; ++i) w[i] = uint8_t(rng() & 0xff);
    for (size_t i = 0; i < n / 16; ++i) sc[i] = f32_to_e4m3(20.0f + 100.0f * (u(rng) + 1.0f));
  }
  std::vector<uint16_t> x(size_t(B) * s.cols);
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i) xf[i] = bf16_to_f32(x[i] = f32_to_bf16(u(rng)));

  void *dw, *dx, *dy, *ds = nullptr;
  CUDA_CHECK(cudaMalloc(&dw, w.size()));
  CUDA_CHECK(cudaMalloc(&dx, x.size() * 2));
  CUDA_CHECK(cudaMalloc(&dy, size_t(B) * s.rows * 4));
  CUDA_CHECK(cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dy, 0xff, size_t(B) * s.rows * 4));  // poison: NaN unless written
  if (!sc.empty()) {
    CUDA_CHECK(cudaMalloc(&ds, sc.size()));
    CUDA_CHECK(cudaMemcpy(ds, sc.data(), sc.size(), cudaMemcpyHostToDevice));
  }
  cuda::GemvParams p{.w = dw, .scale16 = static_cast<const uint8_t*>(ds), .scale2 = scale2,
                     .x = static_cast<const __nv_bfloat16*>(dx), .y = static_cast<float*>(dy), .rows = s.rows, .cols = s.cols};
  cuda::gemv<B, P>(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> y(size_t(B) * s.rows), ref(y.size());
  CUDA_CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));

  host::WeightView v{.precision = P, .rows = s.rows, .cols = s.cols, .data = w.data(), .scale16 = sc.data(), .scale2 = scale2};
  host::linear(v, xf.data(), B, ref.data());
  // Both sides accumulate in fp32, in different orders: the host kernel through about cols/8 + 16
  // roundings per output, the GPU through cols/32 + 5 (lane partial sums of 8, then the warp tree).
  // Their sum, times fp32's unit roundoff, bounds the error relative to sum |w x|.
  const double tol = (s.cols / 8.0 + 16 + s.cols / 32.0 + 5) * 5.96e-8;
  double worst = 0;
  long bad_at = -1;
#pragma omp parallel
  {
    std::vector<float> row(s.cols);
    double my_worst = 0;
    long my_bad = -1;
#pragma omp for schedule(static)
    for (int r = 0; r < s.rows; ++r) {
      host::dequantize_row(v, r, row.data());
      for (int b = 0; b < B; ++b) {
        double mag = 0;
        for (int c = 0; c < s.cols; ++c) mag += std::fabs(double(row[c]) * xf[size_t(b) * s.cols + c]);
        const double err = std::fabs(double(y[size_t(b) * s.rows + r]) - ref[size_t(b) * s.rows + r]);
        const double rel = err / (mag + 1e-30);
        if (!(rel <= my_worst)) my_worst = std::isnan(rel) ? INFINITY : rel;
        if (!(rel <= tol) && my_bad < 0) my_bad = long(b) * s.rows + r;
      }
    }
#pragma omp critical
    {
      worst = std::max(worst, my_worst);
      if (my_bad >= 0 && (bad_at < 0 || my_bad < bad_at)) bad_at = my_bad;
    }
  }
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 5; ++i) cuda::gemv<B, P>(p, nullptr);
  const int reps = 50;
  CUDA_CHECK(cudaEventRecord(e0));
  for (int i = 0; i < reps; ++i) cuda::gemv<B, P>(p, nullptr);
  CUDA_CHECK(cudaEventRecord(e1));
  CUDA_CHECK(cudaEventSynchronize(e1));
  float ms;
  CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  const double us = 1e3 * ms / reps;
  const double bytes = double(w.size() + sc.size() + x.size() * 2 + y.size() * 4);
  const double gbps = bytes / (us * 1e-6) / 1e9;
  std::printf("%-26s %-6s B=%-2d %9.1f us %9.1f MB %8.0f GB/s %6.1f%%  max rel err %.2e %s\n", s.name,
              precision_name(P), B, us, bytes / 1e6, gbps, 100.0 * gbps / copy_gbps, worst, bad_at < 0 ? "ok" : "MISMATCH");
  if (bad_at >= 0)
    std::printf("  first mismatch at b=%ld row=%ld: gpu %.7g host %.7g\n", bad_at / s.rows, bad_at % s.rows, y[bad_at], ref[bad_at]);
  CUDA_CHECK(cudaFree(dw));
  CUDA_CHECK(cudaFree(dx));
  CUDA_CHECK(cudaFree(dy));
  if (ds) CUDA_CHECK(cudaFree(ds));
  return bad_at < 0;
}

}  // namespace

int main() {
  try {
    const double copy = check::device_copy_gbps();
    std::printf("device copy (read+write, 2 GiB): %.0f GB/s; roofline column = achieved / copy\n", copy);
    std::mt19937 rng(7);
    bool ok = true;
    const Shape lm{"lm_head 248320x2048", 248320, 2048, Precision::kBF16};
    const Shape qkv{"gdn in_proj_qkv 8192x2048", 8192, 2048, Precision::kBF16};
    const Shape out{"gdn out_proj 2048x4096", 2048, 4096, Precision::kBF16};
    const Shape experts{"256 experts gate 131072x2048", 131072, 2048, Precision::kNVFP4};
    const Shape down{"256 experts down 524288x512", 524288, 512, Precision::kNVFP4};
    ok &= run<1, Precision::kBF16>(lm, copy, rng);
    ok &= run<8, Precision::kBF16>(lm, copy, rng);
    ok &= run<32, Precision::kBF16>(lm, copy, rng);
    ok &= run<1, Precision::kBF16>(qkv, copy, rng);
    ok &= run<1, Precision::kBF16>(out, copy, rng);
    ok &= run<32, Precision::kBF16>(out, copy, rng);
    ok &= run<1, Precision::kNVFP4>(experts, copy, rng);
    ok &= run<8, Precision::kNVFP4>(experts, copy, rng);
    ok &= run<32, Precision::kNVFP4>(experts, copy, rng);
    ok &= run<1, Precision::kNVFP4>(down, copy, rng);
    std::printf("gemv check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "gemv_check: %s\n", e.what());
    return 1;
  }
}
