// The host engine's static fire (the countdown's third phase, launch/launch.h): every compiled bucket
// runs once, so the first request pays no first-touch cost and a broken bucket is found now, then the
// plan's golden prompt must give the reference's greedy token.
#pragma once

#include <string>

#include "engine/host/host_engine.h"

namespace rocket {

// Returns what it ran and found; throws Error when a bucket gives a non-finite logit or the golden
// token differs from the reference's.
std::string static_fire(HostEngine& e);

}  // namespace rocket
