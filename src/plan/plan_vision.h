// The vision tower a plan carries (docs/vision-tower.md, "In Rocket"): its shapes, the tokens a prompt
// places images with, the text rotary's multimodal section and the image processor. A host or h200 plan
// of a fuel that holds a tower carries it: its BF16 tensors, named `visual.*` as vision_tower_manifest
// lists them, follow the text model's (and a drafting plan's MTP layer) in the blob. An h200 plan also
// bounds one image by its prefill chunk (bound_pixels_by_prefill_chunk) and holds the tower's device
// buffers (compiler/memory_map.cc: vision_inputs, vision_scratch, image_rows).
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
  // The fuel's max_pixels where the plan lowered processor.max_pixels below it (an h200 plan: one image's
  // merged tokens fit its prefill chunk, bound_pixels_by_prefill_chunk); 0 where the plan kept the fuel's.
  // plan.json: vision.processor.max_pixels_requested, present only when lowered.
  uint64_t max_pixels_requested = 0;

  // The most patches one still image takes under processor.max_pixels: its resized size is a multiple
  // of patch · merge on each side (smart_resize), so merge² · floor(max_pixels / (patch · merge)²).
  int64_t max_patches() const;

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

// The H200 engine encodes an image inside one prefill piece, so one image's merged tokens must fit
// `prefill_chunk`: lowers processor.max_pixels to prefill_chunk · (patch · merge)² where it is larger,
// keeping the fuel's in max_pixels_requested (the server then resizes images within the lowered bound,
// as the reference does within its max_pixels). Idempotent. Error naming `where` when min_pixels is then
// over the maximum (no image could be resized within both).
void bound_pixels_by_prefill_chunk(PlanVision& v, int prefill_chunk, const std::string& where);

// Error naming `where` when the H200 engine cannot run the tower: its head_dim has no instantiation of
// the vision attention (kernels/tiling/vision.h vision_attention_head_dim: 16 and 72).
void check_h200_vision(const PlanVision& v, const std::string& where);

// The device buffers an h200 plan that carries a tower holds for the engine (compiler/memory_map.cc
// add_h200_buffers, kernels/tiling/vision.h), each for one image of max_patches() patches:
//   vision_inputs   one forward's inputs (pixels, position taps, rotary cos / sin, attention tiles):
//                   vision_inputs_layout(max_patches, patch_dim, head_dim, merge).bytes
//   vision_scratch  the tower's activations and outputs: vision_scratch_layout(..., max_patches).bytes
//   image_rows      bf16 [kImageRowsPerChunk · prefill_chunk][text hidden]: merged rows the embedding
//                   kernel takes in place of image tokens' embeddings: a call's staging rows (one
//                   chunk), then the engine's encoder cache (engine/h200/h200_images.h: keyed images
//                   encoded once, read by every call that reaches them)
inline constexpr int kImageRowsPerChunk = 5;
struct VisionBufferBytes {
  uint64_t inputs = 0, scratch = 0, image_rows = 0;
};
VisionBufferBytes h200_vision_buffer_bytes(const PlanVision& v, int prefill_chunk, int text_hidden);

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
