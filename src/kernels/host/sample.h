// Token selection from one row of logits, in two phases: adjust the logits (logit_bias and the
// penalties, from the stream's sampling history), then select: greedy argmax, or temperature / min_p /
// top-k / top-p sampling.
//
// Sampling is a pure function of (logits, knobs): the random draw comes from a counter-based
// generator keyed by (seed, counter), so a request reproduces token for token regardless of thread
// count, batch position or what else is in the batch. The caller advances the counter (the token's
// position in the sequence).
#pragma once

#include <cstdint>

#include "core/sampling_history.h"
#include "core/sampling_knobs.h"

namespace rocket::host {

// Index of the largest logit; the lowest index on ties.
int32_t argmax(const float* logits, int n);

// Uniform double in [0, 1) from a splitmix64 hash of (seed, counter); 53 random bits. For a fixed
// seed, distinct counters give distinct draws.
double counter_uniform(uint64_t seed, uint64_t counter);

// The adjust phase: out[i] = logits[i] + its logit bias, then the penalties of knobs.adjusts() in
// vLLM's order (repetition on prompt or output tokens, then frequency and presence on output counts),
// each step rounded to fp32 as the device sampler rounds it. Every later phase reads `out`.
// A row's grammar mask (structured outputs) is applied to `out` after this phase by the caller
// (HostBatchEngine::pick): a masked token's logit becomes -inf and no selection below can pick it.
// REQUIRES: knobs.adjusts() implies history.counts, history.prompt and (knobs.logit_bias > 0) history.bias.
void adjust_logits(const float* logits, int n, const SamplingKnobs& knobs, const SamplingHistory& history, float* out);

// Draws a token from adjusted logits: greedy argmax when temperature <= 0; else logits /
// temperature, keep top_k, softmax as e = exp(s - max), drop tokens with e < min_p (probability below
// min_p of the largest), keep the top_p prefix of the rest sorted by probability (ties to the lower
// index), then invert the cumulative mass at counter_uniform(seed, counter). scratch [n] floats and
// scratch_idx [n] are overwritten (`adjusted` may be `scratch`); nothing is allocated.
// REQUIRES: n >= 1.
int32_t select_token(const float* adjusted, int n, const SamplingKnobs& knobs, float* scratch, int32_t* scratch_idx);

// adjust_logits into scratch when knobs.adjusts(), then select_token. Rows without a history need
// none. REQUIRES: as both.
int32_t sample(const float* logits, int n, const SamplingKnobs& knobs, float* scratch, int32_t* scratch_idx,
               const SamplingHistory& history = {});

}  // namespace rocket::host
