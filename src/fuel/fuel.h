// Fuel: an opened checkpoint directory (HF layout) whose every tensor has been checked against the
// manifest of its chemistry. Once open() returns, tensor(name) is total over the manifest: each
// manifest tensor is present with the manifest's dtype and shape, and nothing unexpected is present
// (vision-tower and MTP tensors are recognised and recorded as unused until those parts are supported;
// an MTP layer the config declares, `mtp_num_hidden_layers`, is checked like the model's tensors and
// readable by name: manifest.h mtp_manifest; so is a vision tower the config declares, `vision_config`,
// when the checkpoint holds any `model.visual.` tensor: vision_tower.h).
//
// Layouts (checkpoint_layout.h): text-only `model.` or multimodal `model.language_model.` names (from
// the config's architecture), routed experts per expert or fused (from the tensors present; one way for
// the whole checkpoint). A fused tensor is cut into the manifest's per-expert views without copying.
// The quantisation lists the config declares (block-FP8 `modules_to_not_convert`, ModelOpt
// `exclude_modules` / `ignore`) are checked against the precision map (declared_precision.h).
//
// Open reads, in the directory:
//   config.json                      architecture and shapes (required)
//   hf_quant_config.json             ModelOpt quantisation (optional; NVFP4 only)
//   model.safetensors.index.json     tensor → shard map, or a single model.safetensors
//   generation_config.json           sampling defaults (optional)
// The weight format comes from the quantisation files: ModelOpt NVFP4 → nvfp4, block-128 FP8 → fp8,
// none → bf16; anything else is refused by name. Immutable after open(); safe to read from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuel/checkpoint_layout.h"
#include "fuel/chemistry.h"
#include "fuel/manifest.h"
#include "fuel/safetensors.h"
#include "fuel/vision_tower.h"

namespace rocket {

class Fuel {
 public:
  // Error naming the file, tensor or field on any missing, malformed or mismatching input.
  static Fuel open(const std::string& dir);

  Fuel(Fuel&&) noexcept = default;
  Fuel& operator=(Fuel&&) noexcept = default;
  Fuel(const Fuel&) = delete;
  Fuel& operator=(const Fuel&) = delete;

  const Chemistry& chemistry() const { return chemistry_; }
  Layout layout() const { return layout_; }
  ExpertLayout expert_layout() const { return expert_layout_; }
  // The vision-tower and MTP tensors present, per part (empty when the checkpoint has none).
  const std::vector<UnusedTensors>& unused() const { return unused_; }
  // The vision tower's shapes when the checkpoint holds one (its tensors checked against
  // vision_tower_manifest and readable by their canonical `visual.` names); nullopt otherwise.
  const std::optional<VisionTowerConfig>& vision() const { return vision_; }
  const std::string& dir() const { return dir_; }
  // The manifest the fuel was validated against, in its deterministic order.
  const std::vector<TensorSpec>& manifest() const { return manifest_; }
  // By canonical name ("layers.0.mlp.gate.weight", "lm_head.weight"); Error if not in the manifest.
  TensorView tensor(const std::string& canonical_name) const;
  const nlohmann::json& config() const { return config_; }
  const nlohmann::json& generation_config() const { return generation_config_; }  // {} when absent
  // Bytes of all manifest tensors (what conditioning reads), not counting unused tensors or headers.
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  Fuel() = default;

  std::string dir_;
  nlohmann::json config_, generation_config_ = nlohmann::json::object();
  Chemistry chemistry_;
  Layout layout_ = Layout::kText;
  ExpertLayout expert_layout_ = ExpertLayout::kPerExpert;
  std::vector<UnusedTensors> unused_;
  std::optional<VisionTowerConfig> vision_;
  std::vector<TensorSpec> manifest_;
  std::vector<SafetensorsFile> shards_;                    // own the mappings the views point into
  std::unordered_map<std::string, TensorView> tensors_;    // canonical name → view
  uint64_t total_bytes_ = 0;
};

// The weight format a checkpoint's quantisation files declare (see the file comment); Error naming
// the file and field for an unsupported or contradictory declaration. Exposed for tests and forge.
WeightFormat detect_weight_format(const std::string& dir, const nlohmann::json& config);

}  // namespace rocket
