// GPU check + benchmark for the dense projection (src/kernels/cuda/dense.cuh). Runs on the H200 machine
// only. For every a3b dense shape and the tiny fuel's, at buckets 1, 8, 32, 64 (every bucket for the two
// biggest: q_proj / in_proj_qkv and the LM head), with random bf16 weights and activations:
//   - the output (poisoned with NaN before the launch) is compared with host::linear on the same bf16
//     inputs within a bound derived below, at rows = B, at a partial rows < B, and below 8 rows also
//     with every mma column reading its own row of x (x_rows = 8, the engine's LM head), and the
//     rows past `rows` must still hold the poison;
//   - a partial last tile (N % 16 != 0) reads NaN padding rows that must not reach a real output;
//   - a CUDA-graph replay must reproduce the direct launch bit for bit;
//   - the launch is timed as a graph of many launches over enough weight copies that they come from HBM,
//     not L2, against a device-to-device copy measured in the same run.
// The grouped form (dense_group: a3b GDN in_proj qkv|z|b|a and attention q|k|v at every bucket, and two
// groups with partial last tiles inside the launch) gets the same checks per segment, and its time is
// printed next to the sum of the segments' separate launches.
// Every launch takes the shape's own form (dense.cuh: registers, or the stream form for the LM head).
// Prints a table with each shape's DenseTraits; exit 1 on any mismatch.
//   dense_check forms   the same checks and timings for the a3b shapes in both forms, side by side
//   dense_check pairs   in_proj in either form alternating with o_proj: the cost of a form beside
//                       another kernel, which a launch timed alone does not show
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <type_traits>
#include <utility>
#include <vector>

#include "check_support.h"
#include "core/dtype.h"
#include "kernels/cuda/dense.cuh"
#include "kernels/host/dense.h"

using namespace rocket;
using cuda::DenseForm;

namespace {

constexpr uint64_t kRotateBytes = uint64_t(128) << 20;  // weight bytes a timed graph cycles through: > 2x L2
constexpr int kMinTimedLaunches = 64;
constexpr uint64_t kCopyAlign = 4096;  // weight copies for timing: page-aligned, like blob tensors (64 KiB)

struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return float(int64_t(next()) >> 40) * (1.0f / float(1ull << 23)); }  // [-1, 1)
};

// n bf16 values uniform in [-1, 1), the same for any thread count (one stream per 1 Mi elements).
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  constexpr size_t kChunk = size_t(1) << 20;
  std::vector<uint16_t> v(n);
  check::parallel_for(int64_t((n + kChunk - 1) / kChunk), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      SplitMix r{seed * 0x100000001b3ull + uint64_t(c)};
      for (size_t i = size_t(c) * kChunk; i < std::min(n, size_t(c + 1) * kChunk); ++i) v[i] = f32_to_bf16(r.uniform());
    }
  });
  return v;
}

// host::linear over row ranges on every core: y [rows][N].
std::vector<float> reference(const std::vector<uint16_t>& w, int N, int K, const std::vector<float>& x, int rows) {
  std::vector<float> y(size_t(rows) * N);
  check::parallel_for((N + 15) / 16, [&](int64_t t0, int64_t t1) {
    const int64_t r0 = 16 * t0, r1 = std::min<int64_t>(N, 16 * t1);
    if (r0 >= r1) return;
    std::vector<float> part(size_t(rows) * (r1 - r0));
    host::linear({.precision = Precision::kBF16, .rows = r1 - r0, .cols = K, .data = w.data() + r0 * K}, x.data(), rows,
                 part.data());
    for (int b = 0; b < rows; ++b)
      std::copy_n(part.data() + size_t(b) * (r1 - r0), r1 - r0, y.data() + size_t(b) * N + r0);
  });
  return y;
}

// fp32 summation error of one output relative to S = sum_k |w_k x_k| (every product is exact in fp32).
// The GPU adds 16 products into its accumulator per mma k16 step (K/16 steps); the tensor core aligns
// the 17 addends to the largest and truncates, so a step may lose a few units of 2^-23 of its
// magnitude (<= S): four are counted. Then up to 32 warp partials are added (2^-24 each, nearest).
// host::linear rounds about K/8 + 8 times to nearest (2^-24). With |w| < 1, S <= sum_k |x_k|.
double gamma(int K) { return (4.0 * K / 16 + 32) * 0x1p-23 + (K / 8.0 + 16) * 0x1p-24; }

struct Weights {  // one shape's weights: host bits and kCopies device copies, NaN past row N
  std::vector<uint16_t> host;
  uint8_t* dev = nullptr;
  uint64_t stride = 0;
  int copies = 0;
  const __nv_bfloat16* copy(int i) const { return reinterpret_cast<const __nv_bfloat16*>(dev + uint64_t(i) * stride); }
};

template <int N, int K, int B, typename Out>
double time_launches(const Weights& w, const __nv_bfloat16* x, Out* y, int x_rows = 0) {
  const int launches = std::max(kMinTimedLaunches, w.copies);
  const double ms = check::graph_time_ms([&](cudaStream_t s) {
    for (int i = 0; i < launches; ++i) cuda::dense<N, K, B, Out>({.w = w.copy(i % w.copies), .x = x, .y = y, .rows = B, .x_rows = x_rows}, s);
  }, 3);
  return 1e3 * ms / launches;
}

// y [B][N] as downloaded after a launch at `rows` token rows on a NaN-poisoned output, against
// host::linear of the same bf16 inputs: every real output within its bound (worst err/bound into
// `worst`), the rows past `rows` still poison byte for byte. Prints the first mismatch.
template <typename Out>
bool check_rows(const char* name, int B, int rows, const std::vector<uint16_t>& w, int N, int K, const std::vector<float>& xf,
                const std::vector<Out>& y, double& worst) {
  constexpr bool kBf16Out = std::is_same_v<Out, __nv_bfloat16>;
  // Bound per output: fp32 summation (gamma * sum |x|), plus for bf16 outputs the rounding of the
  // GPU's fp32 value v: half an ulp, at most 2^-8 |v| (8 significant bits: a value just above a power
  // of two rounds by up to 2^-8 of itself), with |v| <= |ref| + the summation error.
  const std::vector<float> ref = reference(w, N, K, xf, rows);
  bool ok = true;
  for (int b = 0; b < rows && ok; ++b) {
    double xsum = 0;
    for (int k = 0; k < K; ++k) xsum += std::fabs(xf[size_t(b) * K + k]);
    for (int n = 0; n < N; ++n) {
      const size_t o = size_t(b) * N + n;
      const double got = kBf16Out ? bf16_to_f32(reinterpret_cast<const uint16_t*>(y.data())[o]) : double(y[o]);
      const double sum_err = gamma(K) * xsum;
      const double bound = (kBf16Out ? 0x1p-8 * (std::fabs(ref[o]) + sum_err) : 0.0) + sum_err;
      const double rel = std::fabs(got - ref[o]) / bound;
      worst = std::max(worst, std::isnan(rel) ? INFINITY : rel);
      if (!(rel <= 1.0)) {
        std::printf("  %s B=%d rows=%d: first mismatch at row %d col %d: gpu %.8g host %.8g bound %.3g\n", name, B, rows, b,
                    n, got, ref[o], bound);
        ok = false;
        break;
      }
    }
  }
  // Rows past `rows` keep the poison, byte for byte.
  const auto* bytes = reinterpret_cast<const uint8_t*>(y.data());
  const size_t written = size_t(rows) * N * sizeof(Out), total = size_t(B) * N * sizeof(Out);
  if (std::any_of(bytes + written, bytes + total, [](uint8_t v) { return v != 0xff; })) {
    std::printf("  %s B=%d rows=%d: wrote past row %d\n", name, B, rows, rows);
    ok = false;
  }
  return ok;
}

// One bucket at `rows` token rows: correctness, graph replay, and (rows == B) timing. x_rows > rows:
// the kernel may read that many rows of x (DenseParams::x_rows); the extra rows hold other data.
template <int N, int K, int B, typename Out>
bool run(const char* name, const Weights& w, int rows, double copy_gbps, uint64_t seed, int x_rows = 0) {
  using T = cuda::DenseTraits<N, K, B>;
  constexpr bool kBf16Out = std::is_same_v<Out, __nv_bfloat16>;
  const std::vector<uint16_t> x = random_bf16(size_t(std::max(rows, x_rows)) * K, seed);
  const std::vector<float> xf = check::bf16_to_f32(x);
  check::DeviceBuffer<uint16_t> dx(x);
  check::DeviceBuffer<Out> dy(size_t(B) * N);  // poisoned: NaN everywhere
  const auto* xp = reinterpret_cast<const __nv_bfloat16*>(dx.ptr);
  const cuda::DenseParams<N, K, B, Out> p{.w = w.copy(0), .x = xp, .y = dy.ptr, .rows = rows, .x_rows = x_rows};
  cuda::dense<N, K, B, Out>(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<Out> y = dy.download();

  double worst = 0;
  bool ok = check_rows(name, B, rows, w.host, N, K, xf, y, worst);
  const size_t total = size_t(B) * N * sizeof(Out);

  // Graph replay: bit-exact with the direct launch, the untouched rows included.
  {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    cuda::dense<N, K, B, Out>(p, s);
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int rep = 0; rep < 2; ++rep) {
      CUDA_CHECK(cudaMemsetAsync(dy.ptr, 0xff, total, s));
      CUDA_CHECK(cudaGraphLaunch(ge, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      if (std::memcmp(dy.download().data(), y.data(), total) != 0) {
        std::printf("  %s B=%d rows=%d: graph replay %d differs from the direct launch\n", name, B, rows, rep);
        ok = false;
      }
    }
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));
    CUDA_CHECK(cudaStreamDestroy(s));
  }

  char label[96];
  std::snprintf(label, sizeof label, "%s %dx%d %s", name, N, K, kBf16Out ? "bf16" : "f32");
  if (x_rows > rows) std::snprintf(label + std::strlen(label), sizeof label - std::strlen(label), " x%d", x_rows);
  if (rows == B) {
    const double us = time_launches<N, K, B, Out>(w, xp, dy.ptr, x_rows);
    const double moved = 2.0 * N * K + 2.0 * rows * K + double(sizeof(Out)) * rows * N;
    const double gbps = moved / (us * 1e-6) / 1e9;
    std::printf("%-40s B=%-2d rows=%-2d %9.2f us %9.3f MB %6.0f GB/s %5.1f%%  ", label, B, rows, us, moved / 1e6, gbps,
                100.0 * gbps / copy_gbps);
    if constexpr (cuda::kDenseForm<Precision::kBF16, K, B, N> == DenseForm::kStream) {
      using R = cuda::DenseStreamTraits<K, B, N>;
      std::printf("stream: %d blk x %d+1 warps, ring %d x %d B", R::kBlocks, R::kConsumers, R::kRing, R::kStageBytes);
    } else {
      std::printf("%5d blk x %2d warps (%d tile/blk, %2d warp/tile, %d round)", T::kBlocks, T::kWarps, T::kTilesPerBlock,
                  T::kWarpsPerTile, T::kRounds);
    }
    std::printf(" err/bound %.2f %s\n", worst, ok ? "ok" : "MISMATCH");
  } else {
    std::printf("%-40s B=%-2d rows=%-2d %9s    %9s    %6s      %5s   (partial rows) err/bound %.2f %s\n", label, B, rows, "-",
                "-", "-", "-", worst, ok ? "ok" : "MISMATCH");
  }
  return ok;
}

// Random [N][K] weights in `copies` device copies (0: as many as span kRotateBytes), NaN past row N
// up to the copy stride.
Weights make_weights(int N, int K, uint64_t read_bytes, uint64_t seed, int copies = 0) {
  Weights w;
  w.host = random_bf16(size_t(N) * K, seed);
  w.stride = (read_bytes + kCopyAlign - 1) / kCopyAlign * kCopyAlign;
  w.copies = copies > 0 ? copies : int(std::max<uint64_t>(1, (kRotateBytes + read_bytes - 1) / read_bytes));
  CUDA_CHECK(cudaMalloc(&w.dev, w.stride * w.copies));
  CUDA_CHECK(cudaMemset(w.dev, 0xff, w.stride));  // padding rows of a partial tile: NaN
  CUDA_CHECK(cudaMemcpy(w.dev, w.host.data(), w.host.size() * 2, cudaMemcpyHostToDevice));
  for (int c = 1; c < w.copies; ++c) CUDA_CHECK(cudaMemcpy(w.dev + c * w.stride, w.dev, w.stride, cudaMemcpyDeviceToDevice));
  return w;
}

// Every listed bucket of one shape on one set of weights: rows = B, then a partial rows that ends
// inside a group of 8.
template <int N, int K, typename Out, int... Bs>
bool shape(const char* name, double copy_gbps, uint64_t seed) {
  const Weights w = make_weights(N, K, cuda::DenseTraits<N, K, 1>::kWeightReadBytes, seed);
  bool ok = true;
  uint64_t s = seed;
  ((ok &= run<N, K, Bs, Out>(name, w, Bs, copy_gbps, ++s)), ...);
  ((ok &= Bs < 2 || run<N, K, Bs, Out>(name, w, std::max(1, 3 * Bs / 4 - 1), copy_gbps, ++s)), ...);
  // Below 8 rows, every mma column reading its own row of x (as the engine's LM head does).
  ((ok &= Bs >= 8 || run<N, K, Bs, Out>(name, w, Bs, copy_gbps, ++s, 8)), ...);
  CUDA_CHECK(cudaFree(w.dev));
  return ok;
}

// ---- grouped projections (dense_group): segments of one launch sharing x ----------------------------

template <int... Ns>
using Group = std::integer_sequence<int, Ns...>;

// A group launch in the shape's own form (kAuto, as the engine launches it) or in a given one.
constexpr int kAuto = -1;
const char* form_name(DenseForm f) { return f == DenseForm::kStream ? "stream" : "registers"; }

template <int kForm, int K, int B, int... Ns>
constexpr DenseForm form_of = kForm == kAuto ? cuda::kDenseForm<Precision::kBF16, K, B, Ns...> : DenseForm(kForm);

template <int kForm, int K, int B, typename Out, int... Ns>
void launch_group(const cuda::DenseGroupParams<Precision::kBF16, K, B, Out, Ns...>& p, cudaStream_t s) {
  cuda::dense_group_in<form_of<kForm, K, B, Ns...>>(p, 0, s);
}

// One group launch as a graph of many over weight copies from HBM (as time_launches).
template <int kForm, int K, int B, typename Out, int... Ns>
double time_group(const std::vector<Weights>& ws, const __nv_bfloat16* x, Out* const* ys) {
  int copies = 1;
  for (const Weights& w : ws) copies = std::max(copies, w.copies);
  const int launches = std::max(kMinTimedLaunches, copies);
  const double ms = check::graph_time_ms([&](cudaStream_t s) {
    for (int i = 0; i < launches; ++i) {
      cuda::DenseGroupParams<Precision::kBF16, K, B, Out, Ns...> p{.x = x, .rows = B};
      for (size_t j = 0; j < ws.size(); ++j) {
        p.w[j] = ws[j].copy(i % ws[j].copies);
        p.y[j] = ys[j];
      }
      launch_group<kForm>(p, s);
    }
  }, 3);
  return 1e3 * ms / launches;
}

// One bucket of a group at `rows` token rows: every segment against host::linear (outputs poisoned)
// and, where the split of K is the same, bit for bit against its separate launch; graph replay
// bit-exact with the direct launch; and (rows == B) the group timed against the sum of
// the segments' separate dense launches.
template <int kForm, int K, int B, typename Out, int... Ns>
bool run_group(const char* name, const std::vector<Weights>& ws, int rows, double copy_gbps, uint64_t seed) {
  using T = cuda::DenseGroupTraits<Precision::kBF16, K, B, Ns...>;
  constexpr int kS = sizeof...(Ns);
  constexpr int kN[kS] = {Ns...};
  const std::vector<uint16_t> x = random_bf16(size_t(rows) * K, seed);
  const std::vector<float> xf = check::bf16_to_f32(x);
  check::DeviceBuffer<uint16_t> dx(x);
  const auto* xp = reinterpret_cast<const __nv_bfloat16*>(dx.ptr);
  std::deque<check::DeviceBuffer<Out>> dy;  // poisoned: NaN everywhere (deque: buffers do not move)
  for (int j = 0; j < kS; ++j) dy.emplace_back(size_t(B) * kN[j]);
  cuda::DenseGroupParams<Precision::kBF16, K, B, Out, Ns...> p{.x = xp, .rows = rows};
  for (int j = 0; j < kS; ++j) {
    p.w[j] = ws[j].copy(0);
    p.y[j] = dy[j].ptr;
  }
  launch_group<kForm>(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::vector<Out>> y;
  for (int j = 0; j < kS; ++j) y.push_back(dy[j].download());

  bool ok = true;
  double worst = 0;
  for (int j = 0; j < kS; ++j) {
    char seg[96];
    std::snprintf(seg, sizeof seg, "%s segment %d (%dx%d)", name, j, kN[j], K);
    ok &= check_rows(seg, B, rows, ws[j].host, kN[j], K, xf, y[j], worst);
  }
  // A segment whose separate launch sums in the same order (the stream form always: its split of K
  // depends on K alone; the register form when the split is the same: warps per tile, hence rounds)
  // must match that launch bit for bit.
  constexpr DenseForm kF = form_of<kForm, K, B, Ns...>;
  [&]<int... J>(std::integer_sequence<int, J...>) {
    (([&] {
       using S = cuda::DenseTraits<kN[J], K, B>;
       constexpr DenseForm kSF = cuda::kDenseForm<Precision::kBF16, K, B, kN[J]>;
       if constexpr (kSF == kF && (kF == DenseForm::kStream || (S::kWarpsPerTile == T::kWarpsPerTile && S::kG == T::kG))) {
         check::DeviceBuffer<Out> alone(size_t(B) * kN[J]);
         cuda::dense<kN[J], K, B, Out>({.w = ws[J].copy(0), .x = xp, .y = alone.ptr, .rows = rows}, nullptr);
         CUDA_CHECK(cudaDeviceSynchronize());
         if (std::memcmp(alone.download().data(), y[J].data(), size_t(B) * kN[J] * sizeof(Out)) != 0) {
           std::printf("  %s B=%d rows=%d: segment %d differs from its separate launch\n", name, B, rows, J);
           ok = false;
         }
       }
     }()),
     ...);
  }(std::make_integer_sequence<int, kS>{});

  {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    launch_group<kForm>(p, s);
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int rep = 0; rep < 2; ++rep) {
      for (int j = 0; j < kS; ++j) CUDA_CHECK(cudaMemsetAsync(dy[j].ptr, 0xff, size_t(B) * kN[j] * sizeof(Out), s));
      CUDA_CHECK(cudaGraphLaunch(ge, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      for (int j = 0; j < kS; ++j)
        if (std::memcmp(dy[j].download().data(), y[j].data(), size_t(B) * kN[j] * sizeof(Out)) != 0) {
          std::printf("  %s B=%d rows=%d: graph replay %d differs from the direct launch in segment %d\n", name, B, rows, rep, j);
          ok = false;
        }
    }
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));
    CUDA_CHECK(cudaStreamDestroy(s));
  }

  if (rows == B) {
    Out* ys[kS];
    for (int j = 0; j < kS; ++j) ys[j] = dy[j].ptr;
    const double us = time_group<kForm, K, B, Out, Ns...>(ws, xp, ys);
    double moved = 2.0 * rows * K;
    for (int j = 0; j < kS; ++j) moved += 2.0 * kN[j] * K + double(sizeof(Out)) * rows * kN[j];
    const double gbps = moved / (us * 1e-6) / 1e9;
    std::printf("%-40s B=%-2d rows=%-2d %9.2f us %9.3f MB %6.0f GB/s %5.1f%%  ", name, B, rows, us, moved / 1e6, gbps,
                100.0 * gbps / copy_gbps);
    if constexpr (kF == DenseForm::kRegisters) {
      double separate = 0;
      [&]<int... J>(std::integer_sequence<int, J...>) {
        ((separate += time_launches<kN[J], K, B, Out>(ws[J], xp, ys[J])), ...);
      }(std::make_integer_sequence<int, kS>{});
      std::printf("%5d blk x %2d warps; separate launches %.2f us (saves %.2f us)", T::kBlocks, T::kWarps, separate, separate - us);
    } else {
      using R = cuda::DenseStreamTraits<K, B, Ns...>;
      std::printf("stream: %d blk x %d+1 warps, ring %d x %d B", R::kBlocks, R::kConsumers, R::kRing, R::kStageBytes);
    }
    std::printf(" err/bound %.2f %s\n", worst, ok ? "ok" : "MISMATCH");
  } else {
    std::printf("%-40s B=%-2d rows=%-2d (partial rows, %s) err/bound %.2f %s\n", name, B, rows, form_name(kF), worst,
                ok ? "ok" : "MISMATCH");
  }
  return ok;
}

// Every listed bucket of one group (segments Ns over K), rows = B then a partial rows, as shape().
template <int K, typename Out, int kForm = kAuto, int... Ns, int... Bs>
bool group(const char* name, Group<Ns...>, std::integer_sequence<int, Bs...>, double copy_gbps, uint64_t seed) {
  // Every segment gets as many copies as make the whole group span kRotateBytes, so a timed launch
  // reads all its segments from HBM (a separate launch of a small segment may then hit L2: the
  // separate sum is if anything too low).
  constexpr int kN[] = {Ns...};
  constexpr uint64_t kGroupBytes = (uint64_t(0) + ... + (uint64_t((Ns + 15) / 16) * 16 * K * 2));
  const int copies = int(std::max<uint64_t>(1, (kRotateBytes + kGroupBytes - 1) / kGroupBytes));
  std::vector<Weights> ws;
  for (int j = 0; j < int(sizeof...(Ns)); ++j)
    ws.push_back(make_weights(kN[j], K, uint64_t((kN[j] + 15) / 16) * 16 * K * 2, seed * 16 + j, copies));
  bool ok = true;
  uint64_t s = seed;
  ((ok &= run_group<kForm, K, Bs, Out, Ns...>(name, ws, Bs, copy_gbps, ++s)), ...);
  ((ok &= Bs < 2 || run_group<kForm, K, Bs, Out, Ns...>(name, ws, std::max(1, 3 * Bs / 4 - 1), copy_gbps, ++s)), ...);
  for (Weights& w : ws) CUDA_CHECK(cudaFree(w.dev));
  return ok;
}

}  // namespace

// The register and stream forms side by side on the a3b shapes the engine launches at buckets where the
// stream form fits, and on partial tiles for correctness.
template <int kForm>
bool forms(double copy) {
  using bf16 = __nv_bfloat16;
  using Buckets = std::integer_sequence<int, 1, 8, 16>;
  bool ok = true;
  ok &= group<2048, bf16, kForm>("a3b gdn in_proj qkv|z|b|a", Group<8192, 4096, 32, 32>{}, Buckets{}, copy, 14);
  ok &= group<2048, bf16, kForm>("a3b attention q|k|v", Group<8192, 512, 512>{}, Buckets{}, copy, 15);
  ok &= group<4096, bf16, kForm>("a3b o_proj | gdn out_proj", Group<2048>{}, std::integer_sequence<int, 1, 8>{}, copy, 3);
  ok &= group<2048, float, kForm>("a3b router", Group<256>{}, Buckets{}, copy, 8);
  ok &= group<2048, float, kForm>("a3b lm_head", Group<248320>{}, Buckets{}, copy, 9);
  ok &= group<128, bf16, kForm>("tiny partial tiles 24|256|1", Group<24, 256, 1>{}, Buckets{}, copy, 16);
  ok &= group<2048, float, kForm>("f32 partial tiles 8|512|40", Group<8, 512, 40>{}, Buckets{}, copy, 17);
  return ok;
}

// Neighbours: in_proj qkv|z|b|a in either form alternating with o_proj 2048x4096 (registers, default or
// shared-memory-first carveout), as a GDN layer's in_proj and out_proj follow each other in the step,
// timed as one graph of many pairs: what a form costs beside another kernel, not alone.
template <int B>
void pairs() {
  using bf16 = __nv_bfloat16;
  constexpr int kPairs = 40;
  std::vector<Weights> ws;
  const int n[] = {8192, 4096, 32, 32};
  for (int j = 0; j < 4; ++j) ws.push_back(make_weights(n[j], 2048, uint64_t(n[j]) * 2048 * 2, 100 + j, 3));
  const Weights wo = make_weights(2048, 4096, uint64_t(2048) * 4096 * 2, 110, 3);
  check::DeviceBuffer<uint16_t> x(random_bf16(size_t(B) * 4096, 7));
  std::deque<check::DeviceBuffer<bf16>> ys;
  for (int j = 0; j < 5; ++j) ys.emplace_back(size_t(B) * 8192);
  const auto* xp = reinterpret_cast<const bf16*>(x.ptr);
  for (int carve = 0; carve < 2; ++carve) {
    if (carve)
      CUDA_CHECK(cudaFuncSetAttribute(cuda::dense_kernel<2048, 4096, B, bf16, Precision::kBF16>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    for (int f = 0; f < 3; ++f) {
      const double ms = check::graph_time_ms([&](cudaStream_t s) {
        for (int i = 0; i < kPairs; ++i) {
          cuda::DenseGroupParams<Precision::kBF16, 2048, B, bf16, 8192, 4096, 32, 32> p{.x = xp, .rows = B};
          for (int j = 0; j < 4; ++j) {
            p.w[j] = ws[j].copy(i % 3);
            p.y[j] = ys[j].ptr;
          }
          if (f == 0) cuda::dense_group_in<DenseForm::kRegisters>(p, 0, s);
          if (f == 1) cuda::dense_group_in<DenseForm::kStream>(p, 0, s);
          cuda::dense<2048, 4096, B, bf16>({.w = wo.copy(i % 3), .x = xp, .y = ys[4].ptr, .rows = B}, s);
        }
      }, 3);
      std::printf("pairs B=%-2d o_proj carveout %-7s in_proj %-9s: %.2f us per pair\n", B, carve ? "shared" : "default",
                  f == 0 ? "registers" : f == 1 ? "stream" : "(none)", 1e3 * ms / kPairs);
    }
  }
  for (Weights& w : ws) CUDA_CHECK(cudaFree(w.dev));
  CUDA_CHECK(cudaFree(wo.dev));
}

int main(int argc, char** argv) {
  try {
    using bf16 = __nv_bfloat16;
    const double copy = check::device_copy_gbps();
    if (argc > 1 && std::strcmp(argv[1], "pairs") == 0) {
      pairs<1>();
      pairs<8>();
      pairs<16>();
      return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "forms") == 0) {
      std::printf("device copy (read+write, 1 GiB): %.0f GB/s\n", copy);
      bool ok = forms<int(DenseForm::kRegisters)>(copy);
      ok &= forms<int(DenseForm::kStream)>(copy);
      std::printf("dense forms %s\n", ok ? "PASS" : "FAIL");
      return ok ? 0 : 1;
    }
    std::printf("device copy (read+write, 1 GiB): %.0f GB/s; %% = achieved / copy; bytes = weights + x + y (a partial "
                "tile's padding rows not counted); timed weights cycle through >= 128 MiB\n",
                copy);
    bool ok = true;
    ok &= shape<8192, 2048, bf16, 1, 2, 4, 8, 16, 32, 64>("a3b q_proj | gdn in_proj_qkv", copy, 1);
    ok &= shape<512, 2048, bf16, 1, 8, 32, 64>("a3b k,v | shared gate,up", copy, 2);
    ok &= shape<2048, 4096, bf16, 1, 8, 32, 64>("a3b o_proj | gdn out_proj", copy, 3);
    ok &= shape<4096, 2048, bf16, 1, 8, 32, 64>("a3b gdn in_proj_z", copy, 4);
    ok &= shape<32, 2048, bf16, 1, 8, 32, 64>("a3b gdn in_proj_b,a", copy, 5);
    ok &= shape<2048, 512, bf16, 1, 8, 32, 64>("a3b shared down", copy, 6);
    ok &= shape<1, 2048, bf16, 1, 8, 32, 64>("a3b shared_expert_gate", copy, 7);
    ok &= shape<256, 2048, float, 1, 8, 32, 64>("a3b router", copy, 8);
    ok &= shape<248320, 2048, float, 1, 2, 4, 8, 16, 32, 64>("a3b lm_head", copy, 9);
    ok &= shape<256, 128, bf16, 1, 8, 32, 64>("tiny 256x128", copy, 10);
    ok &= shape<64, 128, bf16, 1, 8, 32, 64>("tiny 64x128", copy, 11);
    ok &= shape<128, 256, bf16, 1, 8, 32, 64>("tiny 128x256", copy, 12);
    ok &= shape<151936, 128, float, 1, 8, 32, 64>("tiny lm_head", copy, 13);
    using Buckets = std::integer_sequence<int, 1, 2, 4, 8, 16, 32, 64>;
    ok &= group<2048, bf16>("a3b gdn in_proj qkv|z|b|a", Group<8192, 4096, 32, 32>{}, Buckets{}, copy, 14);
    ok &= group<2048, bf16>("a3b attention q|k|v", Group<8192, 512, 512>{}, Buckets{}, copy, 15);
    // Partial last tiles inside the group (NaN padding rows mid-launch), several tiles per block.
    ok &= group<128, bf16>("tiny partial tiles 24|256|1", Group<24, 256, 1>{}, std::integer_sequence<int, 1, 8, 32, 64>{}, copy, 16);
    ok &= group<2048, float>("f32 partial tiles 8|512|40", Group<8, 512, 40>{}, std::integer_sequence<int, 1, 8, 32, 64>{}, copy, 17);
    std::printf("dense check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "dense_check: %s\n", e.what());
    return 1;
  }
}
