// The H200 decode benchmark (`rocket-engine bench`): every compiled bucket at one context length, with
// distinct tokens per stream, measured against the bytes a step must move and the device's copy
// bandwidth measured in the same run. Prints a markdown table.
#pragma once

#include <vector>

#include "engine/h200/h200_engine.h"

namespace rocket {

// What every stream's rows carry beyond the sampling knobs: the adjust phase's history (penalties in
// the knobs, `logit_bias` biases on random tokens, a 256-token prompt marked) and a grammar mask.
struct BenchRows {
  int logit_bias = 0;   // biases per stream (<= kMaxLogitBias)
  bool masked = false;  // every row masked each step (half the vocabulary allowed, the sampled token kept)
  std::vector<int> buckets;  // the buckets to run; empty: every compiled one
};

// Each bucket decodes `reps` runs of `steps` steps; the table reports the median run. Every stream
// samples with `knobs` (its own seed; greedy when the temperature is <= 0), with `rows`' extras.
// REQUIRES: context + reps * steps + 2 <= the plan's max_context. Returns the process exit status.
int run_bench(H200Engine& e, int context, int steps, int reps, const SamplingKnobs& knobs, const BenchRows& rows = {});

}  // namespace rocket
