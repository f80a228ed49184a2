#include "kernels/host/conv1d.h"

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/host/activations.h"

namespace rocket::host {

void conv1d_step(float* state, const float* x, const uint16_t* w_bf16, int channels, int K, float* out) {
  CHECK(K >= 1, "conv kernel must be >= 1");
  const int hist = K - 1;
  for (int c = 0; c < channels; ++c) {
    float* s = state + int64_t(c) * hist;
    const uint16_t* w = w_bf16 + int64_t(c) * K;
    const float xc = x[c];  // read before out[c] is written: out may alias x
    float acc = 0.0f;
    for (int j = 0; j < hist; ++j) acc += s[j] * bf16_to_f32(w[j]);
    acc += xc * bf16_to_f32(w[hist]);
    for (int j = 0; j + 1 < hist; ++j) s[j] = s[j + 1];
    if (hist > 0) s[hist - 1] = xc;
    out[c] = silu(acc);
  }
}

}  // namespace rocket::host
