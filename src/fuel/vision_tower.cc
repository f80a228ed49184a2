#include "fuel/vision_tower.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuel/config_field.h"

namespace rocket {

using nlohmann::json;

namespace {

// patch_size and temporal_patch_size may be written as [n, n] (HF accepts a pair); the tower is square.
int square_size(const json& v, const char* key, const std::string& where, int fallback) {
  auto it = v.find(key);
  if (it == v.end() || it->is_null()) return fallback;
  if (it->is_array()) {
    if (it->size() != 2 || (*it)[0] != (*it)[1])
      fail("{}: {} {} is not one size (expected n or [n, n])", where, key, it->dump());
    return config_field<int>(json{{key, (*it)[0]}}, key, where);
  }
  return config_field<int>(v, key, where);
}

}  // namespace

int VisionTowerConfig::grid_side() const {
  const int side = int(std::lround(std::sqrt(double(position_embeddings))));
  return side * side == position_embeddings ? side : 0;
}

void VisionTowerConfig::validate(const std::string& path) const {
  auto need = [&](bool ok, const char* field, const std::string& why) {
    if (!ok) fail("{}: vision_config: {} {}", path, field, why);
  };
  need(depth > 0, "depth", fmt::format("= {}: a tower has at least one block", depth));
  need(hidden > 0 && heads > 0 && hidden % heads == 0, "hidden_size",
       fmt::format("= {} is not a positive multiple of num_heads = {}", hidden, heads));
  // The 2-D rotary splits each head in quarters: rows and columns, each rotating pairs of halves.
  need(heads > 0 && head_dim() % 4 == 0, "num_heads",
       fmt::format("= {} gives head_dim {}, not a multiple of 4 (the 2-D rotary's rows and columns)", heads,
                   heads ? head_dim() : 0));
  need(intermediate > 0, "intermediate_size", fmt::format("= {}", intermediate));
  need(in_channels > 0 && patch > 0 && temporal_patch > 0, "patch_size",
       fmt::format("{} x {} x {} (channels x frames x pixels) is empty", in_channels, temporal_patch, patch));
  need(merge > 0, "spatial_merge_size", fmt::format("= {}", merge));
  need(out_hidden > 0, "out_hidden_size", fmt::format("= {}", out_hidden));
  need(position_embeddings > 0 && grid_side() > 0, "num_position_embeddings",
       fmt::format("= {} is not a square grid (the reference interpolates a side x side table)", position_embeddings));
  need(hidden_act == "gelu_pytorch_tanh" || hidden_act == "gelu", "hidden_act",
       fmt::format("'{}' is not supported (expected gelu_pytorch_tanh or gelu)", hidden_act));
  need(rope_theta > 0, "rope_theta", fmt::format("= {}", rope_theta));
}

json VisionTowerConfig::to_json() const {
  return json{{"deepstack_visual_indexes", json::array()}, {"depth", depth}, {"hidden_act", hidden_act},
              {"hidden_size", hidden}, {"in_channels", in_channels}, {"initializer_range", 0.02},
              {"intermediate_size", intermediate}, {"model_type", "qwen3_5_moe"}, {"num_heads", heads},
              {"num_position_embeddings", position_embeddings}, {"out_hidden_size", out_hidden},
              {"patch_size", patch}, {"spatial_merge_size", merge}, {"temporal_patch_size", temporal_patch}};
}

std::optional<VisionTowerConfig> vision_tower_config(const json& config, const std::string& path) {
  auto it = config.find("vision_config");
  if (it == config.end() || it->is_null()) return std::nullopt;
  const json& v = *it;
  if (!v.is_object()) fail("{}: vision_config is not an object", path);
  // Qwen3-VL feeds DeepStack features from these blocks into the first text layers; Qwen3.5's tower has
  // none (its config class has no such field, and the releases write an empty list).
  if (auto d = v.find("deepstack_visual_indexes"); d != v.end() && !d->is_null() && !(d->is_array() && d->empty()))
    fail("{}: vision_config: deepstack_visual_indexes {} is not supported (a Qwen3-VL DeepStack tower; "
         "qwen3_5_moe has none)", path, d->dump());
  const std::string where = path + ": vision_config";
  VisionTowerConfig c;
  const int three = 3, sixteen = 16, two = 2;
  const std::string gelu_tanh = "gelu_pytorch_tanh";
  c.depth = config_field<int>(v, "depth", where);
  c.hidden = config_field<int>(v, "hidden_size", where);
  c.heads = config_field<int>(v, "num_heads", where);
  c.intermediate = config_field<int>(v, "intermediate_size", where);
  c.in_channels = config_field<int>(v, "in_channels", where, &three);
  c.patch = square_size(v, "patch_size", where, sixteen);
  c.temporal_patch = square_size(v, "temporal_patch_size", where, two);
  c.merge = config_field<int>(v, "spatial_merge_size", where, &two);
  c.out_hidden = config_field<int>(v, "out_hidden_size", where);
  c.position_embeddings = config_field<int>(v, "num_position_embeddings", where);
  c.hidden_act = config_field<std::string>(v, "hidden_act", where, &gelu_tanh);
  if (auto rp = v.find("rope_parameters"); rp != v.end() && rp->is_object() && rp->contains("rope_theta"))
    c.rope_theta = config_field<double>(*rp, "rope_theta", where);
  c.validate(path);
  return c;
}

std::vector<TensorSpec> vision_tower_manifest(const VisionTowerConfig& v) {
  std::vector<TensorSpec> out;
  auto plain = [&](std::string name, std::vector<int64_t> shape) {
    out.push_back(TensorSpec{.name = std::move(name), .dtype = DType::kBF16, .shape = std::move(shape)});
  };
  // A BF16 linear y = W x + b; `shape` is W's checkpoint shape when it is not [rows, cols].
  auto linear = [&](const std::string& base, int64_t rows, int64_t cols, std::vector<int64_t> shape = {}) {
    if (shape.empty()) shape = {rows, cols};
    out.push_back(TensorSpec{.name = base + ".weight", .dtype = DType::kBF16, .shape = std::move(shape),
                             .part = Part::kWeight, .precision = Precision::kBF16, .rows = rows, .cols = cols});
    plain(base + ".bias", {rows});
  };
  auto layer_norm = [&](const std::string& base, int64_t n) {
    plain(base + ".weight", {n});
    plain(base + ".bias", {n});
  };
  const int64_t h = v.hidden;
  linear("visual.patch_embed.proj", h, v.patch_dim(), {h, v.in_channels, v.temporal_patch, v.patch, v.patch});
  plain("visual.pos_embed.weight", {v.position_embeddings, h});
  for (int b = 0; b < v.depth; ++b) {
    const std::string p = fmt::format("visual.blocks.{}.", b);
    layer_norm(p + "norm1", h);
    layer_norm(p + "norm2", h);
    linear(p + "attn.qkv", 3 * h, h);
    linear(p + "attn.proj", h, h);
    linear(p + "mlp.linear_fc1", v.intermediate, h);
    linear(p + "mlp.linear_fc2", h, v.intermediate);
  }
  layer_norm("visual.merger.norm", h);
  linear("visual.merger.linear_fc1", v.merged_dim(), v.merged_dim());
  linear("visual.merger.linear_fc2", v.out_hidden, v.merged_dim());
  return out;
}

}  // namespace rocket
