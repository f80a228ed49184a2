// The precision map a plan runs at: per weight role (chemistry.h's Role: embed, lm_head, attn_proj,
// gdn_proj, gdn_gate, router, shared_expert, shared_expert_gate, experts), the precision its weights
// are conditioned into. Unasked, the fuel's own (its format's); `rocket build --precision
// experts=nvfp4,attn_proj=fp8` changes roles the fuel stores in BF16, and conditioning converts them
// (fuel/quantize.h) — so one BF16 checkpoint gives every candidate map `rocket gate` judges.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "fuel/chemistry.h"

namespace rocket {

// Applies "role=precision[,role=precision...]" (precision bf16, fp8 or nvfp4) to `chem`. Error, naming
// the role, for: an unknown role or precision; a role the fuel does not store in BF16 being changed
// (only BF16 weights are converted); the embedding (a gather, kept BF16); NVFP4 on a weight whose
// inner dimension is not a multiple of 16; and, for the h200 booster, a map its kernels do not run
// (check_h200_precisions).
void apply_precision_map(Chemistry& chem, const std::string& spec, const std::string& booster);

// Error, naming every role, unless the h200 kernels run `chem`'s precisions: BF16 anywhere; block FP8
// on the projections, the LM head, the router, the shared and routed experts (dequantised in registers;
// the token path's projections from a dequantised copy); NVFP4 on the routed experts. The embedding (a
// gather) and the shared expert's gate (a dot product) stay BF16.
void check_h200_precisions(const Chemistry& chem);

// "experts=nvfp4,attn_proj=fp8": the roles whose precision differs from the format's ("" for none).
std::string precision_map_spec(const Chemistry& chem);

// The gate report (`rocket gate --out`) that admits `chem`'s map for the BF16 fuel of fingerprint
// `fuel_fingerprint`: Error unless it passed, judged this map against an all-BF16 engine of that
// fuel. Returns what the plan records (precision_gate): the report's path, thresholds and figures.
nlohmann::json admit_precision_map(const Chemistry& chem, const std::string& fuel_fingerprint,
                                   const std::string& report_path);

}  // namespace rocket
