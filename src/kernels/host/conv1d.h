// Depthwise causal conv1d + SiLU for one decode step of one stream (the GDN short convolution).
//
// State: the previous K-1 inputs per channel, [channels][K-1], oldest first, zero for a fresh
// sequence. Stepping T times from a zero state equals HF's F.conv1d(padding=K-1)[..., :T] then SiLU.
#pragma once

#include <cstdint>

namespace rocket::host {

// out[c] = silu(sum_{j<K-1} state[c][j] * w[c][j] + x[c] * w[c][K-1]); then state[c] shifts left by
// one and appends x[c]. w_bf16 [channels][K] is the checkpoint's conv1d.weight squeezed. out may
// not alias state; it may alias x.
void conv1d_step(float* state, const float* x, const uint16_t* w_bf16, int channels, int K, float* out);

}  // namespace rocket::host
