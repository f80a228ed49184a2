// Generates engine.h: the constexpr shapes, tile parameters and arena offsets an engine is built
// from. Every shape and offset is a compile-time constant in the engine; nothing is discovered at
// run time.
#pragma once

#include <string>

#include "plan/plan.h"

namespace rocket {

std::string generate_engine_header(const Plan& plan);

}  // namespace rocket
