#include "plan/plan_vision.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace rocket {

using nlohmann::json;

namespace {

std::array<int, 3> section_of(const json& j, const std::string& where) {
  if (!j.is_array() || j.size() != 3) fail("{}: mrope_section {} is not three integers", where, j.dump());
  std::array<int, 3> s{};
  for (size_t i = 0; i < 3; ++i) {
    if (!j[i].is_number_integer() || j[i].get<int64_t>() < 0 || j[i].get<int64_t>() > 1 << 16)
      fail("{}: mrope_section {} is not three non-negative integers", where, j.dump());
    s[i] = j[i].get<int>();
  }
  return s;
}

}  // namespace

json PlanVision::to_json() const {
  return json{{"vision_config", tower.to_json()},
              {"image_token_id", image_token},
              {"vision_start_token_id", vision_start_token},
              {"vision_end_token_id", vision_end_token},
              {"mrope_section", mrope_section}};
}

PlanVision PlanVision::from_json(const json& j, const std::string& path) {
  PlanVision v;
  const auto tower = vision_tower_config(json{{"vision_config", j.at("vision_config")}}, path + ": vision");
  if (!tower) fail("{}: vision has no vision_config", path);
  v.tower = *tower;
  v.image_token = j.at("image_token_id").get<int32_t>();
  v.vision_start_token = j.at("vision_start_token_id").get<int32_t>();
  v.vision_end_token = j.at("vision_end_token_id").get<int32_t>();
  v.mrope_section = section_of(j.at("mrope_section"), path + ": vision");
  return v;
}

PlanVision plan_vision_of_config(const json& config, const VisionTowerConfig& tower, int vocab,
                                 const std::string& path) {
  PlanVision v;
  v.tower = tower;
  const json* text = config.contains("text_config") && config["text_config"].is_object() ? &config["text_config"] : nullptr;
  auto token = [&](const char* key) {
    const json* at = config.contains(key) ? &config[key] : text && text->contains(key) ? &(*text)[key] : nullptr;
    if (!at) fail("{}: the config declares a vision tower but no {}", path, key);
    if (!at->is_number_integer() || at->get<int64_t>() < 0 || at->get<int64_t>() >= vocab)
      fail("{}: {} {} is not a token of the {}-token vocabulary", path, key, at->dump(), vocab);
    return at->get<int32_t>();
  };
  v.image_token = token("image_token_id");
  v.vision_start_token = token("vision_start_token_id");
  v.vision_end_token = token("vision_end_token_id");
  const json& t = text ? *text : config;
  for (const char* rope : {"rope_parameters", "rope_scaling"})
    if (t.contains(rope) && t[rope].is_object() && t[rope].contains("mrope_section")) {
      v.mrope_section = section_of(t[rope]["mrope_section"], path + ": text_config." + rope);
      break;
    }
  return v;
}

}  // namespace rocket
