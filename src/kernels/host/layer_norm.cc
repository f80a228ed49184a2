#include "kernels/host/layer_norm.h"

#include <cmath>

#include "core/dtype.h"

namespace rocket::host {

void layer_norm(const float* x, const uint16_t* w_bf16, const uint16_t* b_bf16, int dim, float eps, float* y) {
  // Two passes (mean, then the centred squares) rather than E[x²] - E[x]², which cancels badly for
  // vectors far from zero mean, such as a residual stream late in the tower.
  double sum = 0;
  for (int i = 0; i < dim; ++i) sum += x[i];
  const float mean = float(sum / dim);
  double sq = 0;
  for (int i = 0; i < dim; ++i) {
    const float d = x[i] - mean;
    sq += double(d) * d;
  }
  const float inv = 1.0f / std::sqrt(float(sq / dim) + eps);
  for (int i = 0; i < dim; ++i) y[i] = (x[i] - mean) * inv * bf16_to_f32(w_bf16[i]) + bf16_to_f32(b_bf16[i]);
}

}  // namespace rocket::host
