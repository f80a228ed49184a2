// `rocket-engine imagecheck`: images in prefill on this engine (see image_check.cc).
#pragma once

#include <string>

#include "engine/host/host_engine.h"

namespace rocket {

// Runs the checks on `e` (which it leaves with garbage in slots 0..3); with `golden` (a path; empty:
// none) also compares with the reference's logits there, within `tolerance` of the largest
// reference value (a missing file skips, saying so). Returns the exit status.
int cmd_image_check(HostEngine& e, const std::string& golden = "", double tolerance = 0);

}  // namespace rocket
