#include "kernels/host/gdn.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/host/rms_norm.h"

namespace rocket::host {
namespace {

// Below this much state per step the heads run on the calling thread: a fork/join would cost more.
constexpr int64_t kGdnParallelMin = int64_t(1) << 16;

}  // namespace

void gdn_step(float* state, const float* q, const float* k, const float* v, const float* g,
              const float* beta, int Hk, int Hv, int Kd, int Vd, float* out) {
  CHECK(Hk > 0 && Hv % Hk == 0, "GDN value heads must be a multiple of key heads");
  const int group = Hv / Hk;
  // HF: scale = 1 / head_k_dim ** 0.5 in Python double, applied to fp32 q as an fp32 scalar.
  const float q_scale = float(1.0 / std::sqrt(double(Kd)));
#pragma omp parallel for schedule(static) if (int64_t(Hv) * Kd * Vd >= kGdnParallelMin)
  for (int h = 0; h < Hv; ++h) {
    thread_local std::vector<float> scratch;
    if (scratch.size() < size_t(2 * Kd + Vd)) scratch.resize(size_t(2 * Kd + Vd));
    float* qn = scratch.data();
    float* kn = qn + Kd;
    float* delta = kn + Kd;
    const int kh = h / group;
    for (int i = 0; i < Kd; ++i) { qn[i] = q[int64_t(kh) * Kd + i]; kn[i] = k[int64_t(kh) * Kd + i]; }
    l2_normalize(qn, Kd);
    l2_normalize(kn, Kd);
    for (int i = 0; i < Kd; ++i) qn[i] *= q_scale;

    float* S = state + int64_t(h) * Kd * Vd;
    const float decay = std::exp(g[h]);
    const float b = beta[h];
    const float* vh = v + int64_t(h) * Vd;
    float* oh = out + int64_t(h) * Vd;

    // Pass 1: decay the state and read kv_mem = Sᵀk from the decayed rows in the same sweep.
    for (int j = 0; j < Vd; ++j) delta[j] = 0.0f;
    for (int i = 0; i < Kd; ++i) {
      float* row = S + int64_t(i) * Vd;
      const float ki = kn[i];
      for (int j = 0; j < Vd; ++j) {
        row[j] *= decay;
        delta[j] += row[j] * ki;
      }
    }
    for (int j = 0; j < Vd; ++j) delta[j] = (vh[j] - delta[j]) * b;

    // Pass 2: rank-1 update and the output read from the updated rows in the same sweep.
    for (int j = 0; j < Vd; ++j) oh[j] = 0.0f;
    for (int i = 0; i < Kd; ++i) {
      float* row = S + int64_t(i) * Vd;
      const float ki = kn[i], qi = qn[i];
      for (int j = 0; j < Vd; ++j) {
        row[j] += ki * delta[j];
        oh[j] += row[j] * qi;
      }
    }
  }
}

}  // namespace rocket::host
