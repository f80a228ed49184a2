// The H200 decode benchmark (`rocket-engine bench`): every compiled bucket at one context length, with
// distinct tokens per stream, measured against the bytes a step must move and the device's copy
// bandwidth measured in the same run. Prints a markdown table.
#pragma once

#include "engine/h200/h200_engine.h"

namespace rocket {

// Each bucket decodes `reps` runs of `steps` steps; the table reports the median run. Every stream
// samples with `knobs` (its own seed; greedy when the temperature is <= 0).
// REQUIRES: context + reps * steps + 2 <= the plan's max_context. Returns the process exit status.
int run_bench(H200Engine& e, int context, int steps, int reps, const SamplingKnobs& knobs);

}  // namespace rocket
