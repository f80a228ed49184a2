// One request's sampling knobs for one token, as every sampler reads them: the scheduler fills them
// per row (Generation::knobs), the host sampler (kernels/host/sample.h) and the H200's device sampler
// (kernels/cuda/sample.cuh) draw from them. Because the draw is keyed by (seed, counter) rather than by
// any sampler state, a seeded request picks the same token whichever engine samples it, in any batch.
//
// Both samplers run the same two phases on a row: first adjust the logits (logit_bias, then the
// penalties, vLLM's order), then select (temperature, min_p, top-k, top-p, the draw). The adjustments
// read the stream's sampling history (core/sampling_history.h), which a row names with `history`.
//
// Plain data with no CUDA in it; the H200 engine stages these rows as they are in its step inputs,
// where the device sampler reads them, so the layout below is the device's too.
#pragma once

#include <cstdint>

// The device sampler calls adjusts() too (as compiler/nvfp4_code.h shares its decoders).
#ifndef ROCKET_HOST_DEVICE
#ifdef __CUDACC__
#define ROCKET_HOST_DEVICE __host__ __device__
#else
#define ROCKET_HOST_DEVICE
#endif
#endif

namespace rocket {

struct SamplingKnobs {
  float temperature = 1.0f;  // <= 0: greedy (argmax of the adjusted logits, lowest index on ties)
  float top_p = 1.0f;        // < 1: keep the smallest most-likely prefix with mass >= top_p
  int32_t top_k = 0;         // keep the k most likely; 0 (or >= vocab): all
  float min_p = 0.0f;        // > 0: keep tokens whose probability is >= min_p times the largest's
  uint64_t seed = 0;
  uint64_t counter = 0;      // the draw's key beside the seed: the position the token will take
  // vLLM's semantics: a token the prompt or the output holds has its logit divided by
  // repetition_penalty when positive, multiplied when not; then each output occurrence subtracts
  // frequency_penalty, and any output occurrence presence_penalty once (OpenAI's definition).
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  int32_t logit_bias = 0;    // entries of the history's logit bias in use (<= kMaxLogitBias)
  // The stream slot whose sampling history this row reads and whose output counts its draw
  // increments; -1: none, and then no penalty or bias applies (the knobs above are neutral).
  int32_t history = -1;
  // 1: the row's pick is limited to its allowed-token bitmask (structured outputs), applied after the
  // adjust phase. Only the H200 sampler reads it (from the step's mask rows, SampleParams::mask); the
  // host engine takes the mask beside the knobs (HostBatchEngine::pick). 0: unconstrained.
  int32_t masked = 0;
  uint32_t pad[2] = {};      // the row is 64 bytes with the padding spelt out; always 0

  // The row adjusts its logits before selecting: it has a history and a non-neutral knob for it.
  ROCKET_HOST_DEVICE bool adjusts() const {
    return history >= 0 && (presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f ||
                            logit_bias > 0);
  }
};
static_assert(sizeof(SamplingKnobs) == 64 && alignof(SamplingKnobs) == 8,
              "the device sampler reads 64-byte rows and the compiler sizes step_inputs with them");

}  // namespace rocket
