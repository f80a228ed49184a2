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

namespace rocket {

struct PlanVision {
  VisionTowerConfig tower;
  // config.json's `image_token_id` (<|image_pad|>: one per merged patch), `vision_start_token_id` and
  // `vision_end_token_id` (the text tokens around an image).
  int32_t image_token = -1, vision_start_token = -1, vision_end_token = -1;
  // text_config `rope_parameters.mrope_section` (or the older `rope_scaling`'s); the reference's default
  // [11, 11, 10] when absent (kernels/host/attention.h MropeSection says how it is read).
  std::array<int, 3> mrope_section{11, 11, 10};

  nlohmann::json to_json() const;
  static PlanVision from_json(const nlohmann::json& j, const std::string& path);
  bool operator==(const PlanVision& o) const {
    return tower.to_json() == o.tower.to_json() && image_token == o.image_token &&
           vision_start_token == o.vision_start_token && vision_end_token == o.vision_end_token &&
           mrope_section == o.mrope_section;
  }
};

// What a multimodal config.json declares for `tower`: its image token ids (top level, or under
// text_config) and the text rotary's mrope_section. Error naming the field when a token id is missing
// or outside [0, vocab), or the section is not three non-negative integers.
PlanVision plan_vision_of_config(const nlohmann::json& config, const VisionTowerConfig& tower, int vocab,
                                 const std::string& path);

}  // namespace rocket
