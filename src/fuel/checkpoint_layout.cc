#include "fuel/checkpoint_layout.h"

#include <map>

#include <fmt/format.h>

#include "core/error.h"

namespace rocket {

const char* expert_layout_name(ExpertLayout e) { return e == ExpertLayout::kFused ? "fused" : "per-expert"; }

ExpertLayout parse_expert_layout(const std::string& s) {
  if (s == "per-expert") return ExpertLayout::kPerExpert;
  if (s == "fused") return ExpertLayout::kFused;
  fail("unknown expert layout '{}' (expected per-expert or fused)", s);
}

uint64_t StoredTensor::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (auto d : shape) n *= uint64_t(d);
  return n;
}

std::vector<StoredTensor> stored_tensors(const std::vector<TensorSpec>& manifest, const Chemistry& c, Layout layout,
                                         ExpertLayout experts) {
  if (experts == ExpertLayout::kFused && c.precision(Role::kExperts) != Precision::kBF16)
    fail("fused routed experts are defined for bf16 checkpoints only; a {} checkpoint stores each expert's "
         "projections with their scales (mlp.experts.{{e}}.gate_proj.weight, ...)", format_name(c.format));
  std::vector<StoredTensor> out;
  std::map<std::string, size_t> fused_at;  // canonical fused name → its index in `out`
  const int64_t e = c.experts, h = c.hidden, i = c.moe_inter;
  for (size_t k = 0; k < manifest.size(); ++k) {
    const TensorSpec& t = manifest[k];
    const auto at = t.name.find(".mlp.experts.");
    if (experts == ExpertLayout::kPerExpert || at == std::string::npos) {
      out.push_back({checkpoint_name(t.name, layout), t.dtype, t.shape, {k}});
      continue;
    }
    // The manifest lists each expert's gate_proj, up_proj, down_proj in turn, experts in order: so the
    // pieces of gate_up_proj come as gate 0, up 0, gate 1, up 1, ... which is [E][gate rows | up rows].
    const bool down = t.name.ends_with(".down_proj.weight");
    const std::string name = t.name.substr(0, at) + (down ? ".mlp.experts.down_proj" : ".mlp.experts.gate_up_proj");
    auto [it, fresh] = fused_at.emplace(name, out.size());
    if (fresh)
      out.push_back({checkpoint_name(name, layout), DType::kBF16,
                     down ? std::vector<int64_t>{e, h, i} : std::vector<int64_t>{e, 2 * i, h}, {}});
    out[it->second].pieces.push_back(k);
  }
  for (const StoredTensor& s : out) {
    uint64_t sum = 0;
    for (size_t k : s.pieces) sum += manifest[k].nbytes();
    CHECK(sum == s.nbytes(), s.name + ": pieces do not tile the stored tensor");
  }
  return out;
}

}  // namespace rocket
