#include "kernels/host/rms_norm.h"

#include <cmath>

#include "core/dtype.h"
#include "kernels/host/activations.h"

namespace rocket::host {

float sum_squares(const float* x, int dim) {
  constexpr int kLanes = 8;
  float a[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= dim; i += kLanes)
    for (int l = 0; l < kLanes; ++l) a[l] += x[i + l] * x[i + l];
  float s = 0;
  for (int l = 0; l < kLanes; ++l) s += a[l];
  for (; i < dim; ++i) s += x[i] * x[i];
  return s;
}

void rms_norm_zero_centred(const float* x, const uint16_t* w_bf16, int dim, float eps, float* y) {
  const float inv = 1.0f / std::sqrt(sum_squares(x, dim) / float(dim) + eps);
  for (int i = 0; i < dim; ++i) y[i] = x[i] * inv * (1.0f + bf16_to_f32(w_bf16[i]));
}

void rms_norm_gated(const float* x, const float* z, const uint16_t* w_bf16, int dim, float eps, float* y) {
  const float inv = 1.0f / std::sqrt(sum_squares(x, dim) / float(dim) + eps);
  for (int i = 0; i < dim; ++i) y[i] = bf16_to_f32(w_bf16[i]) * (x[i] * inv) * silu(z[i]);
}

void l2_normalize(float* x, int dim) {
  const float inv = 1.0f / std::sqrt(sum_squares(x, dim) + 1e-6f);
  for (int i = 0; i < dim; ++i) x[i] *= inv;
}

}  // namespace rocket::host
