#include "fuel/chemistry.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/hash.h"
#include "core/json_number.h"
#include "fuel/config_field.h"

namespace rocket {

using nlohmann::json;

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kBF16: return "bf16";
    case Precision::kFP8Block: return "fp8_block128";
    case Precision::kNVFP4: return "nvfp4";
  }
  return "?";
}

const char* format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBF16: return "bf16";
    case WeightFormat::kFP8: return "fp8";
    case WeightFormat::kNVFP4: return "nvfp4";
  }
  return "?";
}

WeightFormat parse_format(const std::string& s) {
  if (s == "bf16") return WeightFormat::kBF16;
  if (s == "fp8") return WeightFormat::kFP8;
  if (s == "nvfp4") return WeightFormat::kNVFP4;
  fail("unknown weight format '{}' (expected bf16, fp8 or nvfp4)", s);
}

const char* role_name(Role r) {
  static constexpr const char* kNames[] = {"embed", "lm_head", "attn_proj", "gdn_proj", "gdn_gate",
                                           "router", "shared_expert", "shared_expert_gate", "experts"};
  return kNames[int(r)];
}

Precision parse_precision(const std::string& s) {
  if (s == "bf16") return Precision::kBF16;
  if (s == "fp8" || s == "fp8_block128") return Precision::kFP8Block;
  if (s == "nvfp4") return Precision::kNVFP4;
  fail("unknown precision '{}' (expected bf16, fp8 or nvfp4)", s);
}

Role parse_role(const std::string& s) {
  std::string known;
  for (int r = 0; r < int(Role::kCount); ++r) {
    if (s == role_name(Role(r))) return Role(r);
    known += std::string(r ? ", " : "") + role_name(Role(r));
  }
  fail("unknown weight role '{}' (expected one of {})", s, known);
}

Precision Chemistry::precision(Role r) const {
  if (const auto& o = precision_overrides[size_t(r)]) return *o;
  return format_precision(format, r);
}

Precision format_precision(WeightFormat format, Role r) {
  switch (format) {
    case WeightFormat::kBF16: return Precision::kBF16;
    case WeightFormat::kNVFP4:
      // ModelOpt NVFP4 checkpoints of this family quantise the routed experts only.
      return r == Role::kExperts ? Precision::kNVFP4 : Precision::kBF16;
    case WeightFormat::kFP8:
      // Block FP8 checkpoints quantise every large projection; embeddings, the LM head, the router
      // and the tiny per-head gate projections stay bf16.
      switch (r) {
        case Role::kAttnProj: case Role::kGdnProj: case Role::kSharedExpert: case Role::kExperts:
          return Precision::kFP8Block;
        default: return Precision::kBF16;
      }
  }
  return Precision::kBF16;
}

std::string quantised_roles(const Chemistry& chem) {
  std::string out;
  for (int r = 0; r < int(Role::kCount); ++r)
    if (const Precision p = chem.precision(Role(r)); p != Precision::kBF16)
      out += fmt::format("{}{}={}", out.empty() ? "" : ",", role_name(Role(r)), precision_name(p));
  return out.empty() ? "all bf16" : out;
}

int Chemistry::full_layers() const {
  int n = 0;
  for (auto k : layer_types) n += k == LayerKind::kFullAttention;
  return n;
}
int Chemistry::linear_layers() const { return layers - full_layers(); }

json Chemistry::to_json() const {
  json types = json::array();
  for (auto k : layer_types) types.push_back(k == LayerKind::kFullAttention ? "full_attention" : "linear_attention");
  json precision_map = json::object();
  for (int r = 0; r < int(Role::kCount); ++r) precision_map[role_name(Role(r))] = precision_name(precision(Role(r)));
  json j{{"architecture", architecture}, {"vocab_size", vocab}, {"hidden_size", hidden},
          {"num_hidden_layers", layers}, {"layer_types", types}, {"num_attention_heads", heads},
          {"num_key_value_heads", kv_heads}, {"head_dim", head_dim}, {"rotary_dim", rotary_dim},
          {"partial_rotary_factor", partial_rotary_factor}, {"rope_theta", rope_theta},
          {"linear_num_key_heads", lin_k_heads}, {"linear_num_value_heads", lin_v_heads},
          {"linear_key_head_dim", lin_k_dim}, {"linear_value_head_dim", lin_v_dim},
          {"linear_conv_kernel_dim", conv_kernel}, {"num_experts", experts},
          {"num_experts_per_tok", top_k}, {"moe_intermediate_size", moe_inter},
          {"shared_expert_intermediate_size", shared_inter}, {"rms_norm_eps", norm_eps},
          {"tie_word_embeddings", tie_embeddings}, {"max_position_embeddings", max_positions},
          {"weight_format", format_name(format)}, {"precision_map", precision_map}};
  if (mtp_layers) j["mtp_num_hidden_layers"] = mtp_layers;  // absent when 0: older plans keep their fingerprint
  return j;
}

std::string Chemistry::fingerprint() const {
  // The canonical JSON dump (sorted keys, fixed number formatting) is the hashed form, so any field
  // added to to_json() is covered automatically.
  Fnv64 h;
  h.update(to_json().dump());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.digest()));
  return buf;
}

void Chemistry::validate() const {
  auto need = [](bool ok, const char* field, const std::string& why) {
    if (!ok) fail("chemistry: {} {}", field, why);
  };
  need(vocab > 0 && hidden > 0 && layers > 0, "vocab_size/hidden_size/num_hidden_layers", "must be positive");
  need(int(layer_types.size()) == layers, "layer_types",
       fmt::format("has {} entries, expected num_hidden_layers = {}", layer_types.size(), layers));
  need(heads > 0 && kv_heads > 0 && heads % kv_heads == 0, "num_attention_heads",
       fmt::format("= {} must be a positive multiple of num_key_value_heads = {}", heads, kv_heads));
  need(head_dim > 0 && head_dim % 2 == 0, "head_dim", fmt::format("= {} must be positive and even", head_dim));
  need(rotary_dim > 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0, "partial_rotary_factor",
       fmt::format("gives rotary dim {} for head_dim {}; must be even and within it", rotary_dim, head_dim));
  need(lin_k_heads > 0 && lin_v_heads % lin_k_heads == 0, "linear_num_value_heads",
       fmt::format("= {} must be a multiple of linear_num_key_heads = {}", lin_v_heads, lin_k_heads));
  need(lin_k_dim > 0 && lin_v_dim > 0, "linear_key_head_dim/linear_value_head_dim", "must be positive");
  need(conv_kernel >= 2, "linear_conv_kernel_dim", fmt::format("= {} must be at least 2", conv_kernel));
  need(experts > 0 && top_k > 0 && top_k <= experts, "num_experts_per_tok",
       fmt::format("= {} must be in [1, num_experts = {}]", top_k, experts));
  need(moe_inter > 0 && shared_inter > 0, "moe_intermediate_size/shared_expert_intermediate_size", "must be positive");
  need(norm_eps > 0, "rms_norm_eps", "must be positive");
  need(mtp_layers == 0 || mtp_layers == 1, "mtp_num_hidden_layers",
       fmt::format("= {}: this chemistry's releases have one MTP layer or none", mtp_layers));
  need(!tie_embeddings, "tie_word_embeddings", "= true is not this chemistry (qwen3_5_moe has an untied LM head)");
  if (format == WeightFormat::kNVFP4)
    need(hidden % 16 == 0 && moe_inter % 16 == 0, "hidden_size/moe_intermediate_size",
         "must be multiples of 16 for NVFP4 (one e4m3 scale per 16 weights along K)");
}

Chemistry chemistry_from_config(const json& config, WeightFormat format, const std::string& path) {
  if (!config.is_object()) fail("{}: not a JSON object", path);
  std::string arch = config.contains("architectures") && config["architectures"].is_array() &&
                             !config["architectures"].empty()
                         ? config["architectures"][0].get<std::string>()
                         : "";
  std::string model_type = config_field<std::string>(config, "model_type", path);
  const json* text = &config;
  if (arch == "Qwen3_5MoeForConditionalGeneration" || model_type == "qwen3_5_moe") {
    if (!config.contains("text_config")) fail("{}: multimodal qwen3_5_moe config without 'text_config'", path);
    text = &config["text_config"];
  } else if (!(arch == "Qwen3_5MoeForCausalLM" || (arch.empty() && model_type == "qwen3_5_moe_text"))) {
    fail("{}: architecture '{}' (model_type '{}') is not supported by this compiler; supported: "
         "Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration",
         path, arch.empty() ? "<none>" : arch, model_type);
  }
  const json& t = *text;
  Chemistry c;
  c.format = format;
  c.vocab = config_field<int>(t, "vocab_size", path);
  c.hidden = config_field<int>(t, "hidden_size", path);
  c.layers = config_field<int>(t, "num_hidden_layers", path);
  c.heads = config_field<int>(t, "num_attention_heads", path);
  c.kv_heads = config_field<int>(t, "num_key_value_heads", path);
  const int default_head_dim = c.heads ? c.hidden / c.heads : 0;
  c.head_dim = config_field<int>(t, "head_dim", path, &default_head_dim);
  c.lin_k_heads = config_field<int>(t, "linear_num_key_heads", path);
  c.lin_v_heads = config_field<int>(t, "linear_num_value_heads", path);
  c.lin_k_dim = config_field<int>(t, "linear_key_head_dim", path);
  c.lin_v_dim = config_field<int>(t, "linear_value_head_dim", path);
  c.conv_kernel = config_field<int>(t, "linear_conv_kernel_dim", path);
  c.experts = config_field<int>(t, "num_experts", path);
  c.top_k = config_field<int>(t, "num_experts_per_tok", path);
  c.moe_inter = config_field<int>(t, "moe_intermediate_size", path);
  c.shared_inter = config_field<int>(t, "shared_expert_intermediate_size", path);
  c.norm_eps = config_field<double>(t, "rms_norm_eps", path);
  const bool no = false;
  // `tie_word_embeddings` may sit on the outer multimodal config rather than on text_config.
  c.tie_embeddings = config_field<bool>(t, "tie_word_embeddings", path, &no) || config_field<bool>(config, "tie_word_embeddings", path, &no);
  const int default_positions = 32768;
  c.max_positions = config_field<int>(t, "max_position_embeddings", path, &default_positions);
  const int no_mtp = 0;
  c.mtp_layers = config_field<int>(t, "mtp_num_hidden_layers", path, &no_mtp);
  std::string act = config_field<std::string>(t, "hidden_act", path);
  if (act != "silu") fail("{}: hidden_act '{}' is not supported (expected silu)", path, act);

  // RoPE: transformers 5 writes `rope_parameters`; older configs have top-level rope_theta and
  // partial_rotary_factor.
  json rope = t.contains("rope_parameters") && t["rope_parameters"].is_object() ? t["rope_parameters"] : t;
  const double default_theta = 10000.0, default_partial = 0.25;
  c.rope_theta = config_field<double>(rope, "rope_theta", path, &default_theta);
  c.partial_rotary_factor = config_field<double>(rope, "partial_rotary_factor", path,
                                          t.contains("partial_rotary_factor") ? nullptr : &default_partial);
  if (rope.contains("partial_rotary_factor") == false && t.contains("partial_rotary_factor"))
    c.partial_rotary_factor = config_field<double>(t, "partial_rotary_factor", path);
  std::string rope_type = rope.value("rope_type", std::string("default"));
  if (rope_type != "default") fail("{}: rope_type '{}' is not supported (expected default)", path, rope_type);
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
    fail("{}: partial_rotary_factor {} must be in (0, 1]", path, c.partial_rotary_factor);
  c.rotary_dim = int(c.head_dim * c.partial_rotary_factor);

  if (t.contains("layer_types") && !t["layer_types"].is_null()) {
    for (const auto& s : t["layer_types"]) {
      std::string k = s.is_string() ? s.get<std::string>() : s.dump();
      if (k == "linear_attention") c.layer_types.push_back(LayerKind::kLinearAttention);
      else if (k == "full_attention") c.layer_types.push_back(LayerKind::kFullAttention);
      else fail("{}: layer_types has unknown entry '{}'", path, k);
    }
  } else {
    const int default_interval = 4;
    int interval = config_field<int>(t, "full_attention_interval", path, &default_interval);
    if (interval < 1) fail("{}: full_attention_interval {} must be positive", path, interval);
    for (int i = 0; i < c.layers; ++i)
      c.layer_types.push_back((i + 1) % interval ? LayerKind::kLinearAttention : LayerKind::kFullAttention);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  return c;
}

Chemistry chemistry_from_json(const json& j) {
  Chemistry c;
  c.architecture = j.at("architecture");
  c.vocab = number(j.at("vocab_size"));
  c.hidden = number(j.at("hidden_size"));
  c.layers = number(j.at("num_hidden_layers"));
  for (const auto& s : j.at("layer_types"))
    c.layer_types.push_back(s == "full_attention" ? LayerKind::kFullAttention : LayerKind::kLinearAttention);
  c.heads = number(j.at("num_attention_heads"));
  c.kv_heads = number(j.at("num_key_value_heads"));
  c.head_dim = number(j.at("head_dim"));
  c.rotary_dim = number(j.at("rotary_dim"));
  c.partial_rotary_factor = number(j.at("partial_rotary_factor"));
  c.rope_theta = number(j.at("rope_theta"));
  c.lin_k_heads = number(j.at("linear_num_key_heads"));
  c.lin_v_heads = number(j.at("linear_num_value_heads"));
  c.lin_k_dim = number(j.at("linear_key_head_dim"));
  c.lin_v_dim = number(j.at("linear_value_head_dim"));
  c.conv_kernel = number(j.at("linear_conv_kernel_dim"));
  c.experts = number(j.at("num_experts"));
  c.top_k = number(j.at("num_experts_per_tok"));
  c.moe_inter = number(j.at("moe_intermediate_size"));
  c.shared_inter = number(j.at("shared_expert_intermediate_size"));
  c.norm_eps = number(j.at("rms_norm_eps"));
  c.tie_embeddings = number(j.at("tie_word_embeddings"));
  c.max_positions = number(j.at("max_position_embeddings"));
  c.format = parse_format(j.at("weight_format"));
  if (j.contains("mtp_num_hidden_layers")) c.mtp_layers = number(j.at("mtp_num_hidden_layers"));
  if (j.contains("precision_map"))
    for (const auto& [role, precision] : j.at("precision_map").items()) {
      const Role r = parse_role(role);
      const Precision p = parse_precision(precision.get<std::string>());
      if (p != format_precision(c.format, r)) c.precision_overrides[size_t(r)] = p;
    }
  return c;
}

}  // namespace rocket
