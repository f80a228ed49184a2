// LayerNorm of one vector, FP32, as torch.nn.LayerNorm computes it (the vision tower's norms): the mean
// and the biased variance over `dim`, y = (x - mean) * rsqrt(var + eps) * w + b. Gain and bias are bf16
// as the fuel stores them. y may alias x.
#pragma once

#include <cstdint>

namespace rocket::host {

void layer_norm(const float* x, const uint16_t* w_bf16, const uint16_t* b_bf16, int dim, float eps, float* y);

}  // namespace rocket::host
