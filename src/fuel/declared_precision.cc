#include "fuel/declared_precision.h"

#include <fnmatch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace rocket {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct DeclaredList {
  std::string source;                 // "config.json: quantization_config.modules_to_not_convert"
  std::vector<std::string> entries;
  bool patterns = false;              // fnmatch patterns (ModelOpt) rather than substrings (transformers)

  bool keeps_bf16(const std::string& module) const {
    for (const std::string& e : entries)
      if (patterns ? ::fnmatch(e.c_str(), module.c_str(), 0) == 0 : module.find(e) != std::string::npos) return true;
    return false;
  }
};

// The list at j[key] when it is an array of strings; Error naming it otherwise; nothing when absent.
void take_list(std::vector<DeclaredList>& out, const json& j, const char* key, std::string source, bool patterns) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  DeclaredList l{std::move(source), {}, patterns};
  if (!it->is_array()) fail("{} is not a list of module names ({})", l.source, it->dump());
  for (const json& e : *it) {
    if (!e.is_string()) fail("{}: entry {} is not a module name", l.source, e.dump());
    l.entries.push_back(e.get<std::string>());
  }
  out.push_back(std::move(l));
}

const json* quantization_config(const json& config, std::string& where) {
  for (const json* c : {&config, config.contains("text_config") ? &config["text_config"] : nullptr}) {
    if (!c || !c->is_object()) continue;
    if (auto it = c->find("quantization_config"); it != c->end() && it->is_object()) {
      where = c == &config ? "quantization_config" : "text_config.quantization_config";
      return &*it;
    }
  }
  return nullptr;
}

}  // namespace

void check_declared_precision(const std::string& dir, const json& config, const Chemistry& c, Layout layout) {
  if (c.format == WeightFormat::kBF16) return;
  std::vector<DeclaredList> lists;
  std::string where;
  const json* qc = quantization_config(config, where);
  const std::string cfg = (fs::path(dir) / "config.json").string() + ": " + where;
  if (c.format == WeightFormat::kFP8) {
    if (qc) take_list(lists, *qc, "modules_to_not_convert", cfg + ".modules_to_not_convert", false);
  } else {
    if (qc) {
      take_list(lists, *qc, "ignore", cfg + ".ignore", true);
      take_list(lists, *qc, "exclude_modules", cfg + ".exclude_modules", true);
    }
    const fs::path hq = fs::path(dir) / "hf_quant_config.json";
    if (std::ifstream in(hq); in) {
      // detect_weight_format has read and validated this file already.
      const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("quantization") && j["quantization"].is_object())
        take_list(lists, j["quantization"], "exclude_modules", hq.string() + ": quantization.exclude_modules", true);
    }
  }
  const Precision quantised = c.format == WeightFormat::kFP8 ? Precision::kFP8Block : Precision::kNVFP4;
  for (const DeclaredList& list : lists) {
    struct Family {
      Precision declared, expected;
      size_t modules = 0;
      std::string example;
    };
    std::map<std::string, Family> wrong;
    for (const TensorSpec& t : fuel_manifest(c)) {
      // Linears only: an embedding is never quantised by either tool, whatever the lists say.
      if (t.part != Part::kWeight || t.name == "embed_tokens.weight") continue;
      const std::string canonical = t.name.substr(0, t.name.size() - std::string(".weight").size());
      const std::string module = checkpoint_name(canonical, layout);
      const Precision declared = list.keeps_bf16(module) ? Precision::kBF16 : quantised;
      if (declared == t.precision) continue;
      Family& f = wrong.try_emplace(weight_family(canonical), Family{declared, t.precision, 0, ""}).first->second;
      if (f.modules++ == 0) f.example = module;
    }
    if (wrong.empty()) continue;
    std::string lines;
    for (const auto& [family, f] : wrong)
      lines += fmt::format("\n  {}: declared {} ({} modules, e.g. '{}'); the engines run it as {}", family,
                           precision_name(f.declared), f.modules, f.example, precision_name(f.expected));
    fail("{} declares precisions this chemistry's {} engines have no kernels for:{}", list.source, format_name(c.format),
         lines);
  }
}

}  // namespace rocket
