// One request's sampling knobs for one token, as every sampler reads them: the scheduler fills them
// per row (Generation::knobs), the host sampler (kernels/host/sample.h) and the H200's device sampler
// (kernels/cuda/sample.cuh) draw from them. Because the draw is keyed by (seed, counter) rather than by
// any sampler state, a seeded request picks the same token whichever engine samples it, in any batch.
//
// Plain data with no CUDA in it; the H200 engine stages these rows as they are in its step inputs,
// where the device sampler reads them, so the layout below is the device's too.
#pragma once

#include <cstdint>

namespace rocket {

struct SamplingKnobs {
  float temperature = 1.0f;  // <= 0: greedy (argmax, lowest index on ties)
  float top_p = 1.0f;        // < 1: keep the smallest most-likely prefix with mass >= top_p
  int32_t top_k = 0;         // keep the k most likely; 0 (or >= vocab): all
  uint32_t pad = 0;          // keeps seed 8-byte aligned with the padding spelt out; always 0
  uint64_t seed = 0;
  uint64_t counter = 0;      // the draw's key beside the seed: the position the token will take
};
static_assert(sizeof(SamplingKnobs) == 32 && alignof(SamplingKnobs) == 8,
              "the device sampler reads 32-byte rows and the compiler sizes step_inputs with them");

}  // namespace rocket
