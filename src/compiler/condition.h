// Conditioning: converts each fuel tensor to the layout and precision the engine's kernels read and
// writes it at its plan offset in weights.blob. A part the plan keeps in another precision than the
// fuel stores (the plan's precision map, compiler/precision_map.h) is quantised from the fuel's BF16
// weight on the way (fuel/quantize.h).
#pragma once

#include <string>

#include "fuel/fuel.h"
#include "plan/plan.h"

namespace rocket {

// Writes `blob_path` (exactly plan.blob_bytes; padding zeroed). Each part lands 64 KiB-aligned within
// its unit in the checkpoint's row-major layout; an h200 plan's NVFP4 parts are re-encoded on the way
// into the register code its kernels decode (nvfp4_code.h). Error on I/O failure or a NaN block scale.
void condition_weights(const Fuel& fuel, const Plan& plan, const std::string& blob_path);

}  // namespace rocket
