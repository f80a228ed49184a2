// The vision tower a plan carries (docs/vision-tower.md, "In a plan"): its shapes, the tokens a prompt
// places images with, and the text rotary's multimodal section. Only host plans carry one today (the
// h200 engine has no vision kernels: an h200 plan records the tower under unused_tensors); its BF16
// tensors, named `visual.*` as vision_tower_manifest lists them, follow the text model's (and a drafting
// plan's MTP layer) in the blob.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>  // operator== compares the towers' JSON inline

#include "fuel/vision_tower.h"
#include "vision/image_processor.h"

namespace rocket {

struct PlanVision {
  VisionTowerConfig tower;
  // config.json's `image_token_id` (<|image_pad|>: one per merged patch), `vision_start_token_id` and
  // `vision_end_token_id` (the text tokens around an image).
  int32_t image_token = -1, vision_start_token = -1, vision_end_token = -1;
  // text_config `rope_parameters.mrope_section` (or the older `rope_scaling`'s); the reference's default
  // [11, 11, 10] when absent (kernels/host/attention.h MropeSection says how it is read).
  std::array<int, 3> mrope_section{11, 11, 10};
  // The image processor the server preprocesses with (its pixel bounds, patch geometry, normalisation):
  // the fuel's preprocessor_config.json, or the releases' defaults on the tower's geometry where the
  // fuel has none. `processor_source` says which ("preprocessor_config.json" or "defaults").
  VisionProcessorConfig processor;
  std::string processor_source;

  nlohmann::json to_json() const;
  // Error naming the field on a malformed section, or a processor whose patch geometry is not the tower's.
  static PlanVision from_json(const nlohmann::json& j, const std::string& path);
  bool operator==(const PlanVision& o) const {
    return tower.to_json() == o.tower.to_json() && image_token == o.image_token &&
           vision_start_token == o.vision_start_token && vision_end_token == o.vision_end_token &&
           mrope_section == o.mrope_section && processor_json() == o.processor_json();
  }
  nlohmann::json processor_json() const;  // the plan's `processor` object
};

// What a multimodal config.json declares for `tower`: its image token ids (top level, or under
// text_config) and the text rotary's mrope_section. Error naming the field when a token id is missing
// or outside [0, vocab), or the section is not three non-negative integers.
PlanVision plan_vision_of_config(const nlohmann::json& config, const VisionTowerConfig& tower, int vocab,
                                 const std::string& path);

// The image processor a fuel's preprocessor_config.json declares for `tower`, as the Qwen3-VL and
// Qwen3.5 releases write it (Qwen2VLImageProcessor's fields: `size` {shortest_edge, longest_edge} in
// pixels, or `min_pixels` / `max_pixels`, which override it as in HF; `patch_size`,
// `temporal_patch_size`, `merge_size`, `image_mean`, `image_std`, `rescale_factor`); null
// `preprocessor` (the fuel has none) gives the releases' defaults on the tower's geometry. Error naming
// `path` and the field when the patch, temporal patch or merge size differs from the tower's, a key the
// processor needs is missing (Rocket does not guess HF's class defaults), a bound is not an integer in
// [1, 2^26] (the decoder's pixel bound) or the maximum is under the minimum or under one merged patch
// (patch · merge)², a mean or std is not three finite numbers (std positive), or a step Rocket does not
// implement is asked (another resample than bicubic, do_resize / do_rescale / do_normalize /
// do_convert_rgb false, another image_processor_type than Qwen2VLImageProcessor[Fast]).
VisionProcessorConfig vision_processor_of(const nlohmann::json* preprocessor, const VisionTowerConfig& tower,
                                          const std::string& path);

// What `rocket build` records for a fuel directory's tower: `v.processor` from its
// preprocessor_config.json (vision_processor_of, refused as it refuses), `processor_source`
// "preprocessor_config.json"; where the fuel has none, the releases' defaults on the tower's geometry,
// `processor_source` "defaults".
void read_vision_processor(const std::string& fuel_dir, PlanVision& v);

}  // namespace rocket
