// `rocket-engine cachecheck`: bit-exactness of the prefix cache on this engine (see cache_check.cc).
#pragma once

#include "engine/host/host_engine.h"

namespace rocket {

// Runs the checks on `e` (which it leaves with garbage in slots 0..5); returns the exit status.
int cmd_cache_check(HostEngine& e);

}  // namespace rocket
