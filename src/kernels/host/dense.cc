#include "kernels/host/dense.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/host/cpu_clones.h"

namespace rocket::host {
namespace {

// Rows dequantised together: a token's x (cols floats) is loaded into L1 once and reused across the
// block; 16 rows of fp32 stay within L2 for cols up to ~16k.
constexpr int64_t kRowBlock = 16;
// Independent accumulator lanes per row: enough to hide add latency and vectorise at -O2.
constexpr int kLanes = 8;
// Below this many weight elements a fork/join costs more than the product itself.
constexpr int64_t kDenseParallelMin = int64_t(1) << 15;

// out[i] = dot(w[i], x) for 4 rows sharing every load of x.
[[gnu::always_inline]] inline void dot4(const float* w, int64_t cols, const float* x, float* out) {
  const float *w0 = w, *w1 = w + cols, *w2 = w + 2 * cols, *w3 = w + 3 * cols;
  float a0[kLanes] = {}, a1[kLanes] = {}, a2[kLanes] = {}, a3[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= cols; c += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float xv = x[c + l];
      a0[l] += w0[c + l] * xv;
      a1[l] += w1[c + l] * xv;
      a2[l] += w2[c + l] * xv;
      a3[l] += w3[c + l] * xv;
    }
  }
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int l = 0; l < kLanes; ++l) { s0 += a0[l]; s1 += a1[l]; s2 += a2[l]; s3 += a3[l]; }
  for (; c < cols; ++c) {
    s0 += w0[c] * x[c]; s1 += w1[c] * x[c]; s2 += w2[c] * x[c]; s3 += w3[c] * x[c];
  }
  out[0] = s0; out[1] = s1; out[2] = s2; out[3] = s3;
}

[[gnu::always_inline]] inline float dot1(const float* w, int64_t cols, const float* x) {
  float a[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= cols; c += kLanes)
    for (int l = 0; l < kLanes; ++l) a[l] += w[c + l] * x[c + l];
  float s = 0;
  for (int l = 0; l < kLanes; ++l) s += a[l];
  for (; c < cols; ++c) s += w[c] * x[c];
  return s;
}

// y[t][r0 + i] for i < nr, every token t, from nr dequantised rows in wbuf.
ROCKET_CPU_CLONES
void rows_times_tokens(const float* wbuf, int64_t nr, int64_t cols, const float* x, int n,
                       int64_t rows, int64_t r0, float* y) {
  for (int t = 0; t < n; ++t) {
    const float* xt = x + int64_t(t) * cols;
    float* yt = y + int64_t(t) * rows + r0;
    int64_t i = 0;
    for (; i + 4 <= nr; i += 4) dot4(wbuf + i * cols, cols, xt, yt + i);
    for (; i < nr; ++i) yt[i] = dot1(wbuf + i * cols, cols, xt);
  }
}

}  // namespace

void linear(const WeightView& w, const float* x, int n, float* y) {
  check_view(w);
  CHECK(n >= 1 && x != nullptr && y != nullptr, "linear needs n >= 1 and buffers");
  const int64_t rows = w.rows, cols = w.cols;
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= kDenseParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    thread_local std::vector<float> wbuf;
    if (wbuf.size() < size_t(kRowBlock * cols)) wbuf.resize(size_t(kRowBlock * cols));
    const int64_t r0 = b * kRowBlock, nr = std::min(kRowBlock, rows - r0);
    for (int64_t i = 0; i < nr; ++i) dequantize_row(w, r0 + i, wbuf.data() + i * cols);
    rows_times_tokens(wbuf.data(), nr, cols, x, n, rows, r0, y);
  }
}

}  // namespace rocket::host
