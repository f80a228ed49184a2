// y = W x for a batch of n tokens, W in any stored precision (weights.h), all arithmetic in fp32.
//
// Work split: OpenMP over blocks of rows. Each row is dequantised once per call into a thread-local
// fp32 buffer and dotted with all n inputs, so the weight read and dequantisation amortise over the
// batch. Scratch is thread_local and only grows, so steady-state calls do not allocate.
// Called from inside another OpenMP parallel region it runs serially on that thread (no nesting).
#pragma once

#include "kernels/host/weights.h"

namespace rocket::host {

// x [n][w.cols], y [n][w.rows]; y must not alias x. REQUIRES: n >= 1.
void linear(const WeightView& w, const float* x, int n, float* y);

}  // namespace rocket::host
