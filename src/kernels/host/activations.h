// Scalar activations, FP32, matching torch's definitions so host results track the HF oracle.
#pragma once

#include <cmath>

namespace rocket::host {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// x * sigmoid(x), written as torch's F.silu computes it.
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// torch.nn.functional.softplus with beta = 1, threshold = 20: above the threshold log1p(exp(x)) == x
// in fp32 anyway, and returning x avoids exp overflow.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace rocket::host
