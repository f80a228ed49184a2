// Declared precision: the quantisation lists a checkpoint's config names — block-FP8
// `quantization_config.modules_to_not_convert` (transformers matches an entry anywhere in a module's
// name), ModelOpt `exclude_modules` in hf_quant_config.json and `ignore` / `exclude_modules` in
// config.json's `quantization_config` (fnmatch patterns) — checked against the chemistry's precision
// map, which is what the engines have kernels for. A list that is absent declares nothing.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "fuel/chemistry.h"
#include "fuel/manifest.h"

namespace rocket {

// Error naming the list and, per weight family ("layers.*.self_attn.q_proj"), the modules whose
// declared precision differs from the precision map, when any does.
void check_declared_precision(const std::string& dir, const nlohmann::json& config, const Chemistry& c, Layout layout);

}  // namespace rocket
