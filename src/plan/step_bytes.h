// The roofline's numerator (docs/measuring.md, "The roofline first"): the bytes one decode step must move at
// a bucket and a context length, from the plan alone, so both engines' benchmarks divide the same
// number by their measured copy bandwidth.
//
//   weights  every non-expert weight once, the embedding only as the step's rows
//   experts  the expected union of routed experts per layer under uniform routing,
//            E · (1 − (1 − k/E)^B), times one expert's bytes, in every layer
//   state    per stream: the recurrent state (read + write) and the conv state (read + write) of
//            every linear-attention layer, fp32
//   kv       per stream: K and V of every full-attention layer at `context` tokens (read), at the
//            plan's KV element width
#pragma once

#include "plan/plan.h"

namespace rocket {

struct StepBytes {
  double weights = 0, experts = 0, state = 0, kv = 0;
  double total() const { return weights + experts + state + kv; }
};

// Distinct experts a layer reads when `rows` tokens each route to `top_k` of `experts` uniformly:
// top_k at one row, never more than `experts`. REQUIRES: 0 < top_k <= experts, rows >= 1.
double expected_expert_union(int experts, int top_k, int rows);

// REQUIRES: bucket >= 1, context >= 0; the plan holds layer 0's expert 0 and the embedding.
StepBytes step_bytes(const Plan& plan, int bucket, double context);

}  // namespace rocket
