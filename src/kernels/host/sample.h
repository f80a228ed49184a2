// Token selection from one row of logits: greedy argmax and temperature / top-k / top-p sampling.
//
// Sampling is a pure function of (logits, knobs): the random draw comes from a counter-based
// generator keyed by (seed, counter), so a request reproduces token for token regardless of thread
// count, batch position or what else is in the batch. The caller advances the counter (the token's
// position in the sequence).
#pragma once

#include <cstdint>

#include "core/sampling_knobs.h"

namespace rocket::host {

// Index of the largest logit; the lowest index on ties.
int32_t argmax(const float* logits, int n);

// Uniform double in [0, 1) from a splitmix64 hash of (seed, counter); 53 random bits. For a fixed
// seed, distinct counters give distinct draws.
double counter_uniform(uint64_t seed, uint64_t counter);

// Draws a token: logits / temperature, keep top_k, softmax, keep the top_p prefix of the
// distribution sorted by probability (ties to the lower index), then invert the cumulative mass
// at counter_uniform(seed, counter). scratch [n] floats and scratch_idx [n] are overwritten;
// nothing is allocated. REQUIRES: n >= 1.
int32_t sample(const float* logits, int n, const SamplingKnobs& knobs, float* scratch, int32_t* scratch_idx);

}  // namespace rocket::host
