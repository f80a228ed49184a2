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

// torch's gelu(approximate="tanh") (HF "gelu_pytorch_tanh"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))).
inline float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

// torch's exact gelu (nn.GELU(), HF "gelu"): 0.5 x (1 + erf(x / sqrt(2))).
inline float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); }

}  // namespace rocket::host
