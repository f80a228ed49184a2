// RMS-style normalisations of one vector, FP32, matching HF qwen3_5_moe (Qwen3-Next family).
// y may alias x. Norm gains are bf16 as stored in the fuel.
#pragma once

#include <cstdint>

namespace rocket::host {

// y = x * rsqrt(mean(x²) + eps) * (1 + w). The checkpoint stores the gain zero-centred.
void rms_norm_zero_centred(const float* x, const uint16_t* w_bf16, int dim, float eps, float* y);

// GDN output norm: y = (x * rsqrt(mean(x²) + eps)) * w * silu(z). Plain w here: this norm's gain is
// stored as-is (initialised to ones), unlike rms_norm_zero_centred.
void rms_norm_gated(const float* x, const float* z, const uint16_t* w_bf16, int dim, float eps, float* y);

// x *= rsqrt(sum(x²) + 1e-6), the l2norm HF applies to GDN queries and keys.
void l2_normalize(float* x, int dim);

// sum(x²) with independent accumulators so it vectorises; shared by the norms above and gdn.
float sum_squares(const float* x, int dim);

}  // namespace rocket::host
