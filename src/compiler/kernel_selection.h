// Kernel selection: for every kernel the booster's engine tiles, at every bucket of the plan, the
// launch and tile parameters of kernels/tiling/*.h evaluated for the chemistry's shapes and the
// plan's booster limits. Plain data the plan records, engine.h carries and tests read (DeepGEMM's
// "heuristics live apart from kernels"). The names and shapes here are the h200 engine's launches
// (src/engine/h200/qwen3_5_moe_step.cu), which static_asserts each against its entry.
#pragma once

#include <vector>

#include "plan/plan.h"

namespace rocket {

// h200: one entry per (kernel, bucket); host: none (its kernels are OpenMP loops over rows with a
// static schedule, nothing tiled).
std::vector<PlanKernel> select_kernels(const Plan& plan);

}  // namespace rocket
