// Shared pieces of the GPU checks (tests/cuda/*_check.cu): typed device buffers that start poisoned,
// bf16 data, the device-copy roofline and timing (over primitives/cuda_handles.h), and the bf16
// comparison rule.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/cuda_handles.h"

namespace rocket::check {

// A device allocation filled with 0xff (NaN in bf16 and fp32, -1 in int32) so an output the kernel
// fails to write never passes as a plausible value.
template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) {
    CUDA_CHECK(cudaMalloc(&ptr, n * sizeof(T)));
    CUDA_CHECK(cudaMemset(ptr, 0xff, n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& host) {
    CUDA_CHECK(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count);
    CUDA_CHECK(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
};

// n bf16 values uniform in [lo, hi): the raw bits for the device and their exact fp32 values for the host.
struct Bf16Data {
  std::vector<uint16_t> bits;
  std::vector<float> f;
};
inline Bf16Data random_bf16(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  Bf16Data d{std::vector<uint16_t>(n), std::vector<float>(n)};
  for (size_t i = 0; i < n; ++i) d.f[i] = bf16_to_f32(d.bits[i] = f32_to_bf16(u(rng)));
  return d;
}

inline std::vector<float> bf16_to_f32(const std::vector<uint16_t>& bits) {
  std::vector<float> f(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) f[i] = rocket::bf16_to_f32(bits[i]);
  return f;
}

// f(begin, end) over [0, n) split across the machine's cores (the checks' host references).
template <typename F>
void parallel_for(int64_t n, F f) {
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < nt; ++t) threads.emplace_back([&, t] { f(n * t / nt, n * (t + 1) / nt); });
  for (auto& t : threads) t.join();
}

// Device-to-device copy rate (read + write bytes per second), the roofline every check reports against.
inline double device_copy_gbps() {
  const size_t bytes = size_t(1) << 30;
  DeviceBuffer<uint8_t> a(bytes), b(bytes);
  return copy_gbps(b.ptr, a.ptr, bytes, nullptr, 5);
}

// Mean time of one launch in microseconds, over `reps` back-to-back launches after a warm-up.
template <typename Launch>
double time_us(Launch launch, int reps = 200) {
  for (int i = 0; i < 5; ++i) launch();
  return 1e3 * elapsed_ms(nullptr, [&] {
           for (int i = 0; i < reps; ++i) launch();
         }) /
         reps;
}

// Best time in milliseconds of one replay of the graph `capture(stream)` records, over `reps` replays
// after a warm-up replay. Timing a graph of many launches measures the kernels, not launch overhead.
template <typename Capture>
double graph_time_ms(Capture capture, int reps) {
  const Stream stream;
  cudaStream_t s = stream.get();
  cudaGraph_t g;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  capture(s);
  CUDA_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge;
  CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
  CUDA_CHECK(cudaGraphLaunch(ge, s));
  float best = 1e30f;
  for (int r = 0; r < reps; ++r) best = std::min(best, elapsed_ms(s, [&] { CUDA_CHECK(cudaGraphLaunch(ge, s)); }));
  CUDA_CHECK(cudaGraphExecDestroy(ge));
  CUDA_CHECK(cudaGraphDestroy(g));
  return best;
}

// One table row: what ran, its time, the bytes it must move, and the fraction of the copy roofline.
inline void report(const char* what, int rows, double us, double bytes, double copy_gbps, double worst, bool ok) {
  const double gbps = bytes / (us * 1e-6) / 1e9;
  std::printf("%-34s B=%-3d %9.2f us %10.3f MB %7.0f GB/s %6.1f%%  worst %.2e %s\n", what, rows, us, bytes / 1e6,
              gbps, 100.0 * gbps / copy_gbps, worst, ok ? "ok" : "MISMATCH");
}

// bf16 output against an fp32 reference: the device rounds its fp32 result once, and its fp32 result
// differs from the host's by summation order, so a correct value is within one bf16 ulp of the
// reference (half an ulp of rounding, plus a rounding-boundary flip) plus `abs_tol` for the fp32 part.
// Returns the error in bf16 ulps (the worst-measure the tables print).
inline double bf16_error_ulps(float got, float ref, float abs_tol) {
  const float ulp = std::ldexp(1.0f, std::ilogb(std::max(std::fabs(ref), 1e-30f)) - 7);
  const double err = std::fabs(double(got) - double(ref));
  if (std::isnan(got) || std::isnan(ref)) return INFINITY;
  return err <= abs_tol ? 0.0 : (err - abs_tol) / ulp;
}

}  // namespace rocket::check
