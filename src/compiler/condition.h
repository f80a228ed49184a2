// Conditioning: converts each fuel tensor to the layout and precision the engine's kernels read and
// writes it at its plan offset in weights.blob.
#pragma once

#include <string>

#include "fuel/fuel.h"
#include "plan/plan.h"

namespace rocket {

// Writes `blob_path` (exactly plan.blob_bytes; padding zeroed). Both boosters' kernels currently
// read every part in the checkpoint's own row-major layout, so conditioning is a placement: each
// part lands 64 KiB-aligned within its unit. Error on I/O failure.
void condition_weights(const Fuel& fuel, const Plan& plan, const std::string& blob_path);

}  // namespace rocket
