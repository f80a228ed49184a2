#include "plan/plan_vision.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kernels/tiling/vision.h"

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

// The largest pixel bound a processor may declare: the decoder's own (ImageLimits::max_pixels, 8192²).
// An image is never resized past it but by min_pixels, so a larger bound only makes an upscaling bomb.
constexpr uint64_t kMaxProcessorPixels = uint64_t{1} << 26;

// `key` of `j` as a positive integer no larger than `most`.
uint64_t bounded_integer(const json& j, const char* key, uint64_t most, const std::string& where) {
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || uint64_t(v.get<int64_t>()) > most)
    fail("{}: {} {} is not an integer in [1, {}]", where, key, v.dump(), most);
  return uint64_t(v.get<int64_t>());
}

// A mean or std: three finite numbers (a single number stands for all three, as HF broadcasts it).
std::array<float, 3> triple(const json& v, const char* key, bool positive, const std::string& where) {
  std::array<float, 3> out{};
  const bool scalar = v.is_number();
  if (!scalar && !(v.is_array() && v.size() == 3)) fail("{}: {} {} is not three numbers", where, key, v.dump());
  for (size_t c = 0; c < 3; ++c) {
    const json& x = scalar ? v : v[c];
    if (!x.is_number() || !std::isfinite(x.get<double>()) || (positive && x.get<double>() <= 0))
      fail("{}: {} {} is not three finite{} numbers", where, key, v.dump(), positive ? " positive" : "");
    out[c] = x.get<float>();
  }
  return out;
}

// The processor's fields, checked against the tower (both the build's and a read plan's).
void check_processor(const VisionProcessorConfig& p, const VisionTowerConfig& tower, const std::string& where) {
  auto same = [&](const char* key, int declared, const char* tower_key, int of_tower) {
    if (declared != of_tower)
      fail("{}: {} {} is not the vision tower's {} {} (config.json vision_config): the processor would cut "
           "patches the tower does not embed",
           where, key, declared, tower_key, of_tower);
  };
  same("patch_size", p.patch_size, "patch_size", tower.patch);
  same("temporal_patch_size", p.temporal_patch_size, "temporal_patch_size", tower.temporal_patch);
  same("merge_size", p.merge_size, "spatial_merge_size", tower.merge);
  const uint64_t factor = uint64_t(p.patch_size) * uint64_t(p.merge_size);
  if (p.min_pixels < 1 || p.max_pixels > kMaxProcessorPixels)
    fail("{}: pixel bounds [{}, {}] are not within [1, {}]", where, p.min_pixels, p.max_pixels, kMaxProcessorPixels);
  if (p.max_pixels < p.min_pixels)
    fail("{}: the maximum pixel count {} (longest_edge) is under the minimum {} (shortest_edge)", where, p.max_pixels,
         p.min_pixels);
  if (p.max_pixels < factor * factor)
    fail("{}: the maximum pixel count {} is under one merged patch ({}² = {} pixels): no image fits", where,
         p.max_pixels, factor, factor * factor);
  if (!(p.rescale_factor > 0) || !std::isfinite(p.rescale_factor))
    fail("{}: rescale_factor {} is not a positive number", where, p.rescale_factor);
  for (float s : p.image_std)
    if (!(s > 0)) fail("{}: image_std holds {}, not a positive number", where, s);
}

}  // namespace

json PlanVision::processor_json() const {
  json j{{"source", processor_source},
         {"patch_size", processor.patch_size},
         {"temporal_patch_size", processor.temporal_patch_size},
         {"merge_size", processor.merge_size},
         {"min_pixels", processor.min_pixels},
         {"max_pixels", processor.max_pixels},
         {"image_mean", processor.image_mean},
         {"image_std", processor.image_std},
         {"rescale_factor", processor.rescale_factor}};
  if (max_pixels_requested) j["max_pixels_requested"] = max_pixels_requested;  // absent: the fuel's bound, kept
  return j;
}

int64_t PlanVision::max_patches() const {
  const uint64_t token = uint64_t(processor.patch_size) * processor.merge_size;  // pixels per side of a merged token
  return int64_t(processor.max_pixels / (token * token)) * processor.merge_size * processor.merge_size;
}

void bound_pixels_by_prefill_chunk(PlanVision& v, int prefill_chunk, const std::string& where) {
  VisionProcessorConfig& p = v.processor;
  const uint64_t token = uint64_t(p.patch_size) * p.merge_size;
  const uint64_t bound = uint64_t(prefill_chunk) * token * token;
  if (bound >= p.max_pixels) return;
  if (!v.max_pixels_requested) v.max_pixels_requested = p.max_pixels;
  p.max_pixels = bound;
  if (p.min_pixels > p.max_pixels)
    fail("{}: the h200 engine encodes an image within one prefill piece, so an image's pixels are at most prefill_chunk "
         "{} x (patch {} x merge {})² = {}, under the image processor's min_pixels {} (from {}): no image fits "
         "both; raise --prefill-chunk to {} or more, or lower min_pixels",
         where, prefill_chunk, p.patch_size, p.merge_size, p.max_pixels, p.min_pixels, v.processor_source,
         (p.min_pixels + token * token - 1) / (token * token));
}

VisionBufferBytes h200_vision_buffer_bytes(const PlanVision& v, int prefill_chunk, int text_hidden) {
  const VisionTowerConfig& t = v.tower;
  const int64_t patches = v.max_patches();
  const tiling::VisionDims dims{.hidden = t.hidden, .heads = t.heads, .head_dim = t.head_dim(), .intermediate = t.intermediate,
                                .patch_dim = t.patch_dim(), .merge = t.merge, .out_hidden = t.out_hidden};
  return {.inputs = tiling::vision_inputs_bytes(patches, t.patch_dim(), t.head_dim(), t.merge),
          .scratch = tiling::vision_scratch_layout(dims, patches).bytes,
          .image_rows = uint64_t(kImageRowsPerChunk) * uint64_t(prefill_chunk) * uint64_t(text_hidden) * 2};
}

void check_h200_vision(const PlanVision& v, const std::string& where) {
  const VisionTowerConfig& t = v.tower;
  if (!tiling::vision_attention_head_dim(t.head_dim()))
    fail("{}: the vision tower's head_dim {} (vision_config hidden_size {} / num_heads {}) has no h200 vision attention "
         "kernel (instantiated for head_dim 16 and 72: kernels/cuda/vision_tower.cuh); build for the host booster, "
         "which runs any head_dim",
         where, t.head_dim(), t.hidden, t.heads);
}

json PlanVision::to_json() const {
  return json{{"vision_config", tower.to_json()},
              {"image_token_id", image_token},
              {"vision_start_token_id", vision_start_token},
              {"vision_end_token_id", vision_end_token},
              {"mrope_section", mrope_section},
              {"processor", processor_json()}};
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
  if (!j.contains("processor"))
    fail("{}: vision has no processor (a plan written before plans recorded the image processor): rebuild the engine",
         path);
  const json& p = j.at("processor");
  const std::string where = path + ": vision.processor";
  v.processor_source = p.at("source").get<std::string>();
  v.processor.patch_size = p.at("patch_size").get<int>();
  v.processor.temporal_patch_size = p.at("temporal_patch_size").get<int>();
  v.processor.merge_size = p.at("merge_size").get<int>();
  v.processor.min_pixels = bounded_integer(p, "min_pixels", kMaxProcessorPixels, where);
  v.processor.max_pixels = bounded_integer(p, "max_pixels", kMaxProcessorPixels, where);
  v.processor.image_mean = triple(p.at("image_mean"), "image_mean", false, where);
  v.processor.image_std = triple(p.at("image_std"), "image_std", true, where);
  v.processor.rescale_factor = p.at("rescale_factor").get<double>();
  if (p.contains("max_pixels_requested")) {
    v.max_pixels_requested = bounded_integer(p, "max_pixels_requested", kMaxProcessorPixels, where);
    if (v.max_pixels_requested <= v.processor.max_pixels)
      fail("{}: max_pixels_requested {} is not over max_pixels {} (it records a bound the plan lowered)", where,
           v.max_pixels_requested, v.processor.max_pixels);
  }
  check_processor(v.processor, v.tower, where);
  return v;
}

VisionProcessorConfig vision_processor_of(const json* preprocessor, const VisionTowerConfig& tower,
                                          const std::string& path) {
  VisionProcessorConfig p;  // the releases' bounds, mean, std and rescale factor
  if (!preprocessor) {
    p.patch_size = tower.patch;
    p.temporal_patch_size = tower.temporal_patch;
    p.merge_size = tower.merge;
    check_processor(p, tower, path + " (absent: the releases' defaults)");
    return p;
  }
  const json& j = *preprocessor;
  if (!j.is_object()) fail("{}: not a JSON object", path);
  auto need = [&](const char* key) -> const json& {
    if (!j.contains(key) || j[key].is_null())
      fail("{}: no {} (the image processor's own default is not guessed: state it)", path, key);
    return j[key];
  };
  auto integer = [&](const char* key) {
    const json& v = need(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1 << 16)
      fail("{}: {} {} is not a positive integer", path, key, v.dump());
    return v.get<int>();
  };
  if (j.contains("image_processor_type")) {
    const json& t = j["image_processor_type"];
    if (!t.is_string() || (t != "Qwen2VLImageProcessor" && t != "Qwen2VLImageProcessorFast"))
      fail("{}: image_processor_type {} is not Qwen2VLImageProcessor[Fast], the processor Rocket implements", path,
           t.dump());
  }
  for (const char* step : {"do_resize", "do_rescale", "do_normalize", "do_convert_rgb"})
    if (j.contains(step) && !j[step].is_null() && j[step] != true)
      fail("{}: {} {}: Rocket's processor always takes this step", path, step, j[step].dump());
  if (j.contains("resample") && !j["resample"].is_null() && j["resample"] != 3)
    fail("{}: resample {} is not 3 (bicubic), the resampling Rocket implements", path, j["resample"].dump());
  p.patch_size = integer("patch_size");
  p.temporal_patch_size = integer("temporal_patch_size");
  p.merge_size = integer("merge_size");
  // HF: `size` needs both edges; min_pixels and max_pixels, where given, replace them.
  json bounds = json::object();
  if (j.contains("size") && !j["size"].is_null()) {
    const json& size = j["size"];
    if (!size.is_object() || !size.contains("shortest_edge") || !size.contains("longest_edge"))
      fail("{}: size {} needs shortest_edge and longest_edge (the minimum and maximum pixel counts)", path, size.dump());
    bounds["min_pixels"] = size["shortest_edge"];
    bounds["max_pixels"] = size["longest_edge"];
  }
  for (const char* key : {"min_pixels", "max_pixels"})
    if (j.contains(key) && !j[key].is_null()) bounds[key] = j[key];
  if (!bounds.contains("min_pixels") || !bounds.contains("max_pixels"))
    fail("{}: no pixel bounds (size {{shortest_edge, longest_edge}}, or min_pixels and max_pixels)", path);
  p.min_pixels = bounded_integer(bounds, "min_pixels", kMaxProcessorPixels, path);
  p.max_pixels = bounded_integer(bounds, "max_pixels", kMaxProcessorPixels, path);
  p.image_mean = triple(need("image_mean"), "image_mean", false, path);
  p.image_std = triple(need("image_std"), "image_std", true, path);
  if (j.contains("rescale_factor") && !j["rescale_factor"].is_null()) {
    if (!j["rescale_factor"].is_number()) fail("{}: rescale_factor {} is not a number", path, j["rescale_factor"].dump());
    p.rescale_factor = j["rescale_factor"].get<double>();
  }
  check_processor(p, tower, path);
  return p;
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

void read_vision_processor(const std::string& fuel_dir, PlanVision& v) {
  const std::filesystem::path path = std::filesystem::path(fuel_dir) / "preprocessor_config.json";
  if (!std::filesystem::exists(path)) {
    v.processor = vision_processor_of(nullptr, v.tower, path.string());
    v.processor_source = "defaults";
    return;
  }
  std::ifstream f(path);
  if (!f) fail("{}: cannot read", path.string());
  const json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("{}: not valid JSON", path.string());
  v.processor = vision_processor_of(&j, v.tower, path.string());
  v.processor_source = "preprocessor_config.json";
}

}  // namespace rocket
