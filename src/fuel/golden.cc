#include "fuel/golden.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"

namespace rocket {

using nlohmann::json;

Golden load_golden(const std::string& json_path, const std::string& full_logits_path) {
  std::ifstream f(json_path);
  if (!f) fail("{}: cannot open golden file", json_path);
  Golden g;
  try {
    json j = json::parse(f);
    g.fuel = j.value("fuel", "");
    g.dtype = j.value("dtype", "");
    g.sample_stride = j.at("sample_stride");
    g.vocab = j.at("vocab");
    for (const auto& p : j.at("prompts")) {
      GoldenPrompt gp;
      gp.text = p.value("text", "");
      gp.prompt_ids = p.at("prompt_ids").get<std::vector<int32_t>>();
      gp.greedy_ids = p.at("greedy_ids").get<std::vector<int32_t>>();
      for (const auto& q : p.at("positions")) {
        GoldenPosition pos;
        pos.input_id = q.at("input_id");
        pos.top_ids = q.at("top_ids").get<std::vector<int32_t>>();
        pos.top_logits = q.at("top_logits").get<std::vector<float>>();
        pos.logsumexp = q.at("logsumexp");
        pos.margin = q.at("margin");
        pos.sample = q.at("sample").get<std::vector<float>>();
        gp.positions.push_back(std::move(pos));
      }
      if (gp.positions.size() != gp.prompt_ids.size() + gp.greedy_ids.size())
        fail("{}: prompt has {} positions, expected {}", json_path, gp.positions.size(),
             gp.prompt_ids.size() + gp.greedy_ids.size());
      g.prompts.push_back(std::move(gp));
    }
  } catch (const json::exception& e) {
    fail("{}: malformed golden file: {}", json_path, e.what());
  }
  if (!full_logits_path.empty()) {
    MappedFile m(full_logits_path);
    uint32_t n = 0, vocab = 0;
    if (m.size() < 12 || std::memcmp(m.data(), "RKTL", 4) != 0) fail("{}: not a full-logits file (magic RKTL)", full_logits_path);
    std::memcpy(&n, m.data() + 4, 4);
    std::memcpy(&vocab, m.data() + 8, 4);
    if (n != g.prompts.size() || m.size() != 12 + uint64_t(n) * vocab * 4)
      fail("{}: holds {} rows of {} (size {}), expected {} prompts", full_logits_path, n, vocab, m.size(), g.prompts.size());
    for (uint32_t i = 0; i < n; ++i) {
      g.prompts[i].full_last_prompt.resize(vocab);
      std::memcpy(g.prompts[i].full_last_prompt.data(), m.data() + 12 + uint64_t(i) * vocab * 4, uint64_t(vocab) * 4);
    }
  }
  return g;
}

namespace {

void consider(LogitDiff& d, int32_t id, float ref, float got) {
  float diff = std::fabs(ref - got);
  if (!(diff <= d.max_abs)) {  // NaN in `got` always becomes the worst
    d.max_abs = std::isnan(diff) ? INFINITY : diff;
    d.worst_id = id;
    d.ref = ref;
    d.got = got;
  }
  d.scale = std::max(d.scale, std::fabs(ref));
}

}  // namespace

LogitDiff compare_logits(const GoldenPosition& ref, int stride, const float* logits, int vocab) {
  LogitDiff d;
  for (size_t i = 0; i < ref.top_ids.size(); ++i) consider(d, ref.top_ids[i], ref.top_logits[i], logits[ref.top_ids[i]]);
  for (size_t i = 0; i < ref.sample.size() && int64_t(i) * stride < vocab; ++i)
    consider(d, int32_t(i * stride), ref.sample[i], logits[i * stride]);
  d.rel = d.max_abs / d.scale;
  return d;
}

LogitDiff compare_full(const std::vector<float>& ref, const float* logits, int vocab) {
  LogitDiff d;
  for (int i = 0; i < vocab && i < int(ref.size()); ++i) consider(d, i, ref[i], logits[i]);
  d.rel = d.max_abs / d.scale;
  return d;
}

}  // namespace rocket
