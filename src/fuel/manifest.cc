#include "fuel/manifest.h"

#include <regex>

#include <fmt/format.h>

namespace rocket {

uint64_t TensorSpec::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (auto d : shape) n *= uint64_t(d);
  return n;
}

std::string checkpoint_name(const std::string& canonical, Layout layout) {
  if (canonical == "lm_head" || canonical.starts_with("lm_head.")) return canonical;  // a module or its tensors
  if (canonical.starts_with("mtp.")) return canonical;  // the releases keep the MTP layer at the top level
  if (canonical.starts_with("visual.")) return "model." + canonical;  // the vision tower, beside language_model
  return (layout == Layout::kText ? "model." : "model.language_model.") + canonical;
}

std::string weight_unit(const std::string& n) {
  // "layers.L.mlp.experts.E.<proj>.<part>" -> "layers.L.mlp.experts.E"
  if (auto p = n.find(".mlp.experts."); p != std::string::npos) {
    auto e_end = n.find('.', p + 13);
    return n.substr(0, e_end);
  }
  for (const char* suffix : {".weight_scale_inv", ".weight_scale_2", ".weight_scale", ".input_scale", ".weight"})
    if (n.ends_with(suffix)) return n.substr(0, n.size() - std::string(suffix).size());
  return n;
}

std::string weight_family(const std::string& n) {
  static const std::regex kIndex(R"(\.[0-9]+\.)");
  return std::regex_replace(n, kIndex, ".*.");
}

namespace {

struct Builder {
  std::vector<TensorSpec> out;

  void plain(std::string name, DType dtype, std::vector<int64_t> shape) {
    out.push_back(TensorSpec{.name = std::move(name), .dtype = dtype, .shape = std::move(shape)});
  }

  // A linear weight [rows, cols] (y = W x, x has `cols` elements) stored at `precision`.
  void linear(const std::string& base, int64_t rows, int64_t cols, Precision p) {
    auto add = [&](const char* suffix, DType t, std::vector<int64_t> shape, Part part) {
      out.push_back(TensorSpec{.name = base + suffix, .dtype = t, .shape = std::move(shape), .part = part,
                               .precision = p, .rows = rows, .cols = cols});
    };
    switch (p) {
      case Precision::kBF16:
        add(".weight", DType::kBF16, {rows, cols}, Part::kWeight);
        break;
      case Precision::kFP8Block:
        add(".weight", DType::kF8E4M3, {rows, cols}, Part::kWeight);
        add(".weight_scale_inv", DType::kF32, {(rows + 127) / 128, (cols + 127) / 128}, Part::kScaleInv128);
        break;
      case Precision::kNVFP4:
        add(".weight", DType::kU8, {rows, cols / 2}, Part::kWeight);
        add(".weight_scale", DType::kF8E4M3, {rows, cols / 16}, Part::kScale16);
        add(".weight_scale_2", DType::kF32, {}, Part::kScale2);
        add(".input_scale", DType::kF32, {}, Part::kInputScale);
        break;
    }
  }
};

}  // namespace

namespace {

// One decoder layer's tensors under `p` ("layers.3." or "mtp.layers.0."), each role at `precision`.
template <class PrecisionOf>
void add_layer(Builder& b, const Chemistry& c, const std::string& p, LayerKind kind, PrecisionOf precision) {
  const auto bf16 = DType::kBF16;
  b.plain(p + "input_layernorm.weight", bf16, {c.hidden});
  b.plain(p + "post_attention_layernorm.weight", bf16, {c.hidden});
  if (kind == LayerKind::kLinearAttention) {
    const std::string a = p + "linear_attn.";
    const Precision proj = precision(Role::kGdnProj), gate = precision(Role::kGdnGate);
    b.linear(a + "in_proj_qkv", c.conv_dim(), c.hidden, proj);
    b.linear(a + "in_proj_z", c.value_dim(), c.hidden, proj);
    b.linear(a + "in_proj_b", c.lin_v_heads, c.hidden, gate);
    b.linear(a + "in_proj_a", c.lin_v_heads, c.hidden, gate);
    b.plain(a + "conv1d.weight", bf16, {c.conv_dim(), 1, c.conv_kernel});
    b.plain(a + "dt_bias", bf16, {c.lin_v_heads});
    b.plain(a + "A_log", bf16, {c.lin_v_heads});
    b.plain(a + "norm.weight", bf16, {c.lin_v_dim});
    b.linear(a + "out_proj", c.hidden, c.value_dim(), proj);
  } else {
    const std::string a = p + "self_attn.";
    const Precision proj = precision(Role::kAttnProj);
    b.linear(a + "q_proj", int64_t(c.heads) * c.head_dim * 2, c.hidden, proj);  // query | gate per head
    b.linear(a + "k_proj", int64_t(c.kv_heads) * c.head_dim, c.hidden, proj);
    b.linear(a + "v_proj", int64_t(c.kv_heads) * c.head_dim, c.hidden, proj);
    b.linear(a + "o_proj", c.hidden, int64_t(c.heads) * c.head_dim, proj);
    b.plain(a + "q_norm.weight", bf16, {c.head_dim});
    b.plain(a + "k_norm.weight", bf16, {c.head_dim});
  }
  const std::string m = p + "mlp.";
  b.linear(m + "gate", c.experts, c.hidden, precision(Role::kRouter));
  for (int e = 0; e < c.experts; ++e) {
    const std::string x = fmt::format("{}experts.{}.", m, e);
    const Precision ep = precision(Role::kExperts);
    b.linear(x + "gate_proj", c.moe_inter, c.hidden, ep);
    b.linear(x + "up_proj", c.moe_inter, c.hidden, ep);
    b.linear(x + "down_proj", c.hidden, c.moe_inter, ep);
  }
  const Precision sp = precision(Role::kSharedExpert);
  b.linear(m + "shared_expert.gate_proj", c.shared_inter, c.hidden, sp);
  b.linear(m + "shared_expert.up_proj", c.shared_inter, c.hidden, sp);
  b.linear(m + "shared_expert.down_proj", c.hidden, c.shared_inter, sp);
  b.linear(m + "shared_expert_gate", 1, c.hidden, precision(Role::kSharedExpertGate));
}

}  // namespace

std::vector<TensorSpec> fuel_manifest(const Chemistry& c) {
  Builder b;
  const auto map = [&](Role r) { return c.precision(r); };
  b.linear("embed_tokens", c.vocab, c.hidden, c.precision(Role::kEmbed));
  for (int l = 0; l < c.layers; ++l) add_layer(b, c, fmt::format("layers.{}.", l), c.layer_types[size_t(l)], map);
  b.plain("norm.weight", DType::kBF16, {c.hidden});
  b.linear("lm_head", c.vocab, c.hidden, c.precision(Role::kLmHead));
  return b.out;
}

std::vector<TensorSpec> mtp_manifest(const Chemistry& c) {
  Builder b;
  const auto bf16 = [](Role) { return Precision::kBF16; };
  for (int l = 0; l < c.mtp_layers; ++l) {
    if (l == 0) {
      b.linear("mtp.fc", c.hidden, 2 * int64_t(c.hidden), Precision::kBF16);
      b.plain("mtp.pre_fc_norm_embedding.weight", DType::kBF16, {c.hidden});
      b.plain("mtp.pre_fc_norm_hidden.weight", DType::kBF16, {c.hidden});
    }
    add_layer(b, c, fmt::format("mtp.layers.{}.", l), LayerKind::kFullAttention, bf16);
  }
  if (c.mtp_layers) b.plain("mtp.norm.weight", DType::kBF16, {c.hidden});
  return b.out;
}

}  // namespace rocket
