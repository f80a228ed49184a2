#include "fuel/fuel.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "fuel/declared_precision.h"

namespace rocket {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Tensors real Qwen3.5 checkpoints carry for parts this compiler does not build yet.
struct UnusedPart {
  const char* part;
  const char* prefix;
};
constexpr UnusedPart kUnusedParts[] = {
    {"vision", "model.visual."}, {"vision", "visual."}, {"mtp", "mtp."}, {"mtp", "model.mtp."}};

const UnusedPart* unused_part_of(const std::string& name) {
  for (const UnusedPart& p : kUnusedParts)
    if (name.starts_with(p.prefix)) return &p;
  return nullptr;
}
// A mismatching fuel usually mismatches in bulk (wrong format, wrong layout): show this many lines.
constexpr size_t kMaxProblemsShown = 12;

json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", path.string(), e.what());
  }
}

// The routed experts' layout, from the decoder layers' tensors: per expert (`experts.{e}.…`) or fused
// (`experts.gate_up_proj`, `experts.down_proj`). Error naming a tensor of each when a checkpoint mixes
// them, or the fused tensor when the format has no fused layout.
ExpertLayout detect_expert_layout(const std::unordered_map<std::string, const TensorView*>& present, Layout layout,
                                  WeightFormat format, const std::string& dir) {
  const std::string layers = checkpoint_name("layers.", layout);
  std::string fused, per_expert;  // the first of each, by name, so the message is deterministic
  for (const auto& [n, view] : present) {
    if (!n.starts_with(layers)) continue;
    const auto at = n.find(".mlp.experts.");
    if (at == std::string::npos) continue;
    const std::string rest = n.substr(at + 13);
    const bool is_fused = rest.starts_with("gate_up_proj") || rest.starts_with("down_proj");
    if (!is_fused && !(!rest.empty() && rest[0] >= '0' && rest[0] <= '9')) continue;  // reported as unexpected
    std::string& first = is_fused ? fused : per_expert;
    if (first.empty() || n < first) first = n;
  }
  if (!fused.empty() && !per_expert.empty())
    fail("{}: mixes expert layouts: '{}' is a fused expert tensor and '{}' a per-expert one; a checkpoint stores all "
         "its routed experts one way", dir, fused, per_expert);
  if (fused.empty()) return ExpertLayout::kPerExpert;
  if (format != WeightFormat::kBF16)
    fail("{}: tensor '{}': fused routed experts are read from bf16 checkpoints only; a {} checkpoint stores each "
         "expert's projections with their scales (mlp.experts.{{e}}.gate_proj.weight, ...)", dir, fused,
         format_name(format));
  return ExpertLayout::kFused;
}

std::string describe(DType t, const std::vector<int64_t>& shape) {
  return fmt::format("{} [{}]", dtype_name(t), fmt::join(shape, ", "));
}

// ModelOpt's NVFP4 block: quant_algo "NVFP4", one scale per 16 weights, no quantised KV cache.
void check_modelopt(const json& q, const std::string& where) {
  auto algo = q.find("quant_algo");
  if (algo == q.end() || !algo->is_string()) fail("{}: missing string field 'quant_algo'", where);
  if (*algo != "NVFP4")
    fail("{}: quant_algo '{}' is not supported (expected NVFP4)", where, algo->get<std::string>());
  if (auto g = q.find("group_size"); g != q.end() && !g->is_null() && *g != 16)
    fail("{}: group_size {} is not supported (NVFP4 uses 16)", where, g->dump());
  // A quantised KV cache brings k/v scale tensors and a cache dtype this chemistry does not have.
  if (auto kv = q.find("kv_cache_quant_algo"); kv != q.end() && !kv->is_null())
    fail("{}: kv_cache_quant_algo {} is not supported (expected null)", where, kv->dump());
}

}  // namespace

WeightFormat detect_weight_format(const std::string& dir, const json& config) {
  std::optional<WeightFormat> from_modelopt_file, from_config;
  std::string config_source;

  const fs::path hq = fs::path(dir) / "hf_quant_config.json";
  if (fs::exists(hq)) {
    json j = read_json(hq);
    const std::string where = hq.string() + ": quantization";
    if (!j.is_object() || !j.contains("quantization") || !j["quantization"].is_object())
      fail("{}: missing object 'quantization'", hq.string());
    check_modelopt(j["quantization"], where);
    from_modelopt_file = WeightFormat::kNVFP4;
  }

  // Hub configs carry quantization_config at the top level; a multimodal export may nest it.
  const json* qc = nullptr;
  if (config.contains("quantization_config") && !config["quantization_config"].is_null()) {
    qc = &config["quantization_config"];
    config_source = "config.json: quantization_config";
  } else if (config.contains("text_config") && config["text_config"].is_object() &&
             config["text_config"].contains("quantization_config") &&
             !config["text_config"]["quantization_config"].is_null()) {
    qc = &config["text_config"]["quantization_config"];
    config_source = "config.json: text_config.quantization_config";
  }
  if (qc) {
    const std::string where = (fs::path(dir) / config_source).string();
    if (!qc->is_object()) fail("{} is not an object", where);
    auto method = qc->find("quant_method");
    if (method == qc->end() || !method->is_string()) fail("{}: missing string field 'quant_method'", where);
    if (*method == "fp8") {
      auto block = qc->find("weight_block_size");
      if (block == qc->end() || *block != json::array({128, 128}))
        fail("{}: weight_block_size {} is not supported (expected [128, 128] block FP8)", where,
             block == qc->end() ? std::string("<missing>") : block->dump());
      if (auto f = qc->find("fmt"); f != qc->end() && *f != "e4m3")
        fail("{}: fmt {} is not supported (expected e4m3)", where, f->dump());
      from_config = WeightFormat::kFP8;
    } else if (*method == "modelopt") {
      check_modelopt(*qc, where);
      from_config = WeightFormat::kNVFP4;
    } else {
      fail("{}: quant_method '{}' is not supported (expected fp8 or modelopt)", where, method->get<std::string>());
    }
  }

  if (from_modelopt_file && from_config && *from_modelopt_file != *from_config)
    fail("{}: hf_quant_config.json declares {} but config.json declares {}", dir, format_name(*from_modelopt_file),
         format_name(*from_config));
  if (from_modelopt_file) return *from_modelopt_file;
  if (from_config) return *from_config;
  return WeightFormat::kBF16;
}

Fuel Fuel::open(const std::string& dir) {
  Fuel f;
  f.dir_ = dir;
  const fs::path root(dir);
  if (!fs::is_directory(root)) fail("{}: not a directory", dir);

  const fs::path config_path = root / "config.json";
  if (!fs::exists(config_path)) fail("{}: missing (a fuel directory needs an HF config.json)", config_path.string());
  f.config_ = read_json(config_path);
  if (!f.config_.is_object()) fail("{}: not a JSON object", config_path.string());
  const fs::path gen_path = root / "generation_config.json";
  if (fs::exists(gen_path)) {
    f.generation_config_ = read_json(gen_path);
    if (!f.generation_config_.is_object()) fail("{}: not a JSON object", gen_path.string());
  }

  const WeightFormat format = detect_weight_format(dir, f.config_);
  f.chemistry_ = chemistry_from_config(f.config_, format, config_path.string());
  const json& archs = f.config_.contains("architectures") ? f.config_["architectures"] : json();
  const bool multimodal =
      (archs.is_array() && !archs.empty() && archs[0] == "Qwen3_5MoeForConditionalGeneration") ||
      f.config_.value("model_type", std::string()) == "qwen3_5_moe";
  f.layout_ = multimodal ? Layout::kMultimodal : Layout::kText;

  // Shards, and which shard each tensor lives in.
  const fs::path index_path = root / "model.safetensors.index.json";
  const fs::path single_path = root / "model.safetensors";
  std::map<std::string, std::string> placement;  // checkpoint name → shard file name (index only)
  if (fs::exists(index_path)) {
    json index = read_json(index_path);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail("{}: missing object 'weight_map'", index_path.string());
    std::map<std::string, std::vector<std::string>> by_shard;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        fail("{}: weight_map entry '{}' is not a file name ({})", index_path.string(), it.key(), it.value().dump());
      const std::string shard = it.value().get<std::string>();
      // Shards are siblings of the index; a path would let an index reach outside the fuel.
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        fail("{}: tensor '{}' maps to '{}', which is not a file name in the fuel directory", index_path.string(),
             it.key(), shard);
      placement[it.key()] = shard;
      by_shard[shard].push_back(it.key());
    }
    if (by_shard.empty()) fail("{}: weight_map is empty", index_path.string());
    // The index's claims are checked against every shard before the shards' own contents, so a
    // stale index is reported as such rather than as a stray tensor in some other shard.
    for (const auto& [shard, names] : by_shard) {
      const fs::path p = root / shard;
      if (!fs::exists(p))
        fail("{}: shard '{}' (holding {} tensors, e.g. '{}') does not exist", index_path.string(), shard,
             names.size(), names.front());
      f.shards_.emplace_back(p.string());
      const auto& held = f.shards_.back().tensors();
      for (const std::string& n : names)
        if (!held.contains(n))
          fail("{}: tensor '{}' is mapped to '{}', but that shard does not hold it", index_path.string(), n, shard);
    }
    for (const auto& s : f.shards_) {
      const std::string shard = fs::path(s.path()).filename().string();
      for (const auto& [n, view] : s.tensors()) {
        auto it = placement.find(n);
        if (it == placement.end())
          fail("{}: tensor '{}' is not listed in {}", s.path(), n, index_path.filename().string());
        if (it->second != shard)
          fail("{}: tensor '{}' is also held here, but the index maps it to '{}'", s.path(), n, it->second);
      }
    }
  } else if (fs::exists(single_path)) {
    f.shards_.emplace_back(single_path.string());
  } else {
    fail("{}: no model.safetensors.index.json and no model.safetensors", dir);
  }

  // Every checkpoint tensor, once (the index checks above rule out a name held by two shards).
  std::unordered_map<std::string, const TensorView*> present;
  for (const auto& s : f.shards_)
    for (const auto& [n, view] : s.tensors()) {
      if (!present.emplace(n, &view).second) fail("{}: tensor '{}' is held by more than one shard", dir, n);
    }
  auto shard_of = [&](const TensorView& v) -> std::string {
    for (const auto& s : f.shards_)
      if (auto it = s.tensors().find(v.name); it != s.tensors().end() && &it->second == &v)
        return fs::path(s.path()).filename().string();
    return "?";
  };

  f.expert_layout_ = detect_expert_layout(present, f.layout_, format, dir);
  check_declared_precision(dir, f.config_, f.chemistry_, f.layout_);
  f.manifest_ = fuel_manifest(f.chemistry_);
  std::vector<std::string> problems;
  f.tensors_.reserve(f.manifest_.size());
  std::unordered_set<std::string> used;
  // Checks each stored tensor of `manifest` and makes its pieces readable by name. The model's tensors
  // are what plans load (used, counted in total_bytes); the MTP layer the config declares is checked
  // the same way but stays with the unused parts below (no plan loads it yet: manifest.h).
  auto take = [&](const std::vector<TensorSpec>& manifest, bool model, const char* what,
                  const std::string& missing_why) {
    for (const StoredTensor& st : stored_tensors(manifest, f.chemistry_, f.layout_, f.expert_layout_)) {
      auto it = present.find(st.name);
      if (it == present.end()) {
        problems.push_back(fmt::format("missing {} '{}' (expected {}{})", what, st.name, describe(st.dtype, st.shape),
                                       missing_why));
        continue;
      }
      const TensorView& v = *it->second;
      if (model) used.insert(st.name);
      if (v.dtype != st.dtype || v.shape != st.shape) {
        problems.push_back(fmt::format("tensor '{}' in {}: expected {}, found {}", st.name, shard_of(v),
                                       describe(st.dtype, st.shape), describe(v.dtype, v.shape)));
        continue;
      }
      uint64_t at = 0;  // a fused tensor's pieces tile it in manifest order (checkpoint_layout.h)
      for (size_t k : st.pieces) {
        const TensorSpec& spec = manifest[k];
        f.tensors_.emplace(spec.name, TensorView{st.name, spec.dtype, spec.shape, v.data + at, spec.nbytes()});
        at += spec.nbytes();
      }
      if (model) f.total_bytes_ += v.nbytes;
    }
  };
  take(f.manifest_, true, "tensor", "");
  take(mtp_manifest(f.chemistry_), false, "MTP tensor",
       fmt::format("; the config declares mtp_num_hidden_layers = {}", f.chemistry_.mtp_layers));
  std::unordered_set<std::string> vision_names;  // the declared tower's checkpoint names, when it is present
  // The vision tower: checked in full once the checkpoint holds any of it. A release stripped to its text
  // model may keep the multimodal config; it then has no tower (and nothing under model.visual.).
  if (auto vision = vision_tower_config(f.config_, config_path.string())) {
    if (vision->out_hidden != f.chemistry_.hidden)
      fail("{}: vision_config: out_hidden_size {} differs from the text model's hidden_size {} (the merged image "
           "tokens take the place of text embeddings)", config_path.string(), vision->out_hidden, f.chemistry_.hidden);
    const std::string prefix = checkpoint_name("visual.", f.layout_);
    if (std::any_of(present.begin(), present.end(), [&](const auto& p) { return p.first.starts_with(prefix); })) {
      const std::vector<TensorSpec> tower = vision_tower_manifest(*vision);
      take(tower, false, "vision tensor", "; the config declares a vision_config");
      for (const TensorSpec& t : tower) vision_names.insert(checkpoint_name(t.name, f.layout_));
      f.vision_ = std::move(vision);
    }
  }
  std::map<std::string, UnusedTensors> unused;  // by prefix, so the record is in a fixed order
  std::vector<std::string> extras;
  for (const auto& [n, view] : present) {
    if (used.contains(n)) continue;
    const UnusedPart* p = unused_part_of(n);
    if (p && f.vision_ && std::string_view(p->part) == "vision" && !vision_names.contains(n)) p = nullptr;
    if (p) {
      UnusedTensors& u = unused[p->prefix];
      u.part = p->part;
      u.prefix = p->prefix;
      ++u.tensors;
      u.bytes += view->nbytes;
    } else {
      extras.push_back(fmt::format("unexpected tensor '{}' in {} ({})", n, shard_of(*view), describe(view->dtype, view->shape)));
    }
  }
  std::sort(extras.begin(), extras.end());  // unordered_map order would make the message nondeterministic
  problems.insert(problems.end(), extras.begin(), extras.end());

  if (!problems.empty()) {
    std::string lines;
    for (size_t i = 0; i < problems.size() && i < kMaxProblemsShown; ++i) lines += "\n  " + problems[i];
    if (problems.size() > kMaxProblemsShown) lines += fmt::format("\n  ... and {} more", problems.size() - kMaxProblemsShown);
    fail("{}: does not match its chemistry ({} {} layout, {} experts, {} weights, fingerprint {}): {} problem(s):{}", dir,
         f.chemistry_.architecture, f.layout_ == Layout::kText ? "text" : "multimodal",
         expert_layout_name(f.expert_layout_), format_name(format), f.chemistry_.fingerprint(), problems.size(), lines);
  }
  for (auto& [prefix, u] : unused) {
    fmt::print(stderr, "fuel: {}: {} {} tensors under '{}' ({} bytes) are recorded as unused until that part is built\n",
               dir, u.tensors, u.part, prefix, u.bytes);
    f.unused_.push_back(std::move(u));
  }
  return f;
}

TensorView Fuel::tensor(const std::string& canonical_name) const {
  auto it = tensors_.find(canonical_name);
  if (it == tensors_.end())
    fail("{}: no tensor '{}' in the {} manifest (names are canonical, e.g. 'layers.0.mlp.gate.weight')", dir_,
         canonical_name, chemistry_.architecture);
  return it->second;
}

}  // namespace rocket
