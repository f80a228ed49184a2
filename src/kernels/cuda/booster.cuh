// The booster every kernel's traits are sized for: SM count, shared memory per block and L2 of the
// hardware profile the compiler planned with. An engine build takes them from its generated
// engine.h (found through -I ENGINE_DIR); the GPU checks (tests/cuda), which have no engine.h, are
// compiled with the committed H200 profile's numbers, which CMake reads from boosters/h200.json
// into ROCKET_CHECK_BOOSTER_*.
#pragma once

#include "kernels/tiling/booster.h"

#ifdef ROCKET_CHECK_BOOSTER_SMS
namespace rocket::cuda {
inline constexpr tiling::BoosterLimits kBooster{ROCKET_CHECK_BOOSTER_SMS, ROCKET_CHECK_BOOSTER_SMEM_PER_BLOCK,
                                                ROCKET_CHECK_BOOSTER_L2_BYTES};
}  // namespace rocket::cuda
#else
#include "engine.h"
namespace rocket::cuda {
inline constexpr tiling::BoosterLimits kBooster = engine::kBoosterLimits;
}  // namespace rocket::cuda
#endif
