// Kernel selection: for each op of the chemistry, the implementation and pinned tile parameters the
// booster's engine is built with. Plain data the plan records and tests can read (DeepGEMM's
// "heuristics live apart from kernels").
#pragma once

#include <vector>

#include "plan/plan.h"

namespace rocket {

std::vector<KernelChoice> select_kernels(const Chemistry& c, const std::string& booster);

}  // namespace rocket
