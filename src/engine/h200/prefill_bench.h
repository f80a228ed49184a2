// The H200 prefill commands: `rocket-engine prefill-bench` (cold prompts of several lengths and a
// continuation of a cached prefix, the token path's piece split by kernel kind, against the tensor-core
// peak measured in the same run) and `rocket-engine prefill-check` (the token path against the
// bucket-sized pieces of the decode kernels: logits, the state it leaves, decode after it, a
// continuation over a cached prefix and a snapshot inside a piece).
#pragma once

#include <vector>

#include "engine/h200/h200_engine.h"

namespace rocket {

// Median of `reps` cold prefills of each length (one stream, chunks of the plan's prefill_chunk, the
// first token picked on the device); `prefix` > 0 adds `continuation` tokens continuing a cached
// prefix of that many. Prints a markdown table. Returns the process exit status.
int run_prefill_bench(H200Engine& e, const std::vector<int>& lengths, int prefix, int continuation, int reps,
                      double peak_tflops);

// Mixed steps: `decode_rows` streams decoding at `context` tokens while a cold prompt piece of each
// length arrives, one prefill_batch call (decode rows first) against the decode step alone and the
// decode step followed by a separate prefill call. Prints a markdown table; returns the exit status.
int run_mixed_bench(H200Engine& e, int decode_rows, const std::vector<int>& lengths, int context, int reps);

// The dense bf16 tensor-core peak of this device in TFLOP/s: a cuBLAS 8192³ GEMM, median of 10. Run
// before the engine uprights (it allocates its own operands).
double measure_tensor_peak();

// PASS/FAIL per case with the worst relative differences; exit status 0 when every case is within
// `tolerance`.
int run_prefill_check(H200Engine& e, float tolerance);

}  // namespace rocket
