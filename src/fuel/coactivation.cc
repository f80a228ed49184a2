#include "fuel/coactivation.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/hash.h"
#include "core/json_number.h"

namespace fs = std::filesystem;

namespace rocket {

using nlohmann::json;

CoactivationProfile::CoactivationProfile(const Chemistry& chem, std::string fuel_fp) {
  fuel_ = ProfiledFuel{chem.architecture, chem.fingerprint(), std::move(fuel_fp), chem.layers, chem.experts, chem.top_k};
  tokens_.assign(size_t(chem.layers), 0);
  frequency_.assign(size_t(chem.layers) * chem.experts, 0);
  pairs_.assign(size_t(chem.layers) * chem.experts * chem.experts, 0);
}

void CoactivationProfile::add(int layer, const int* idx, int rows, int k) {
  CHECK(layer >= 0 && layer < fuel_.layers && k == fuel_.top_k, "route counts of another shape");
  const int E = fuel_.experts;
  for (int r = 0; r < rows; ++r) {
    const int* row = idx + int64_t(r) * k;
    for (int i = 0; i < k; ++i) {
      CHECK(row[i] >= 0 && row[i] < E, "expert id out of range");
      ++frequency_[index(layer, row[i])];
      for (int j = i + 1; j < k; ++j) {
        CHECK(row[i] != row[j], "a token's top-k experts are distinct");
        ++pairs_[pair_index(layer, std::min(row[i], row[j]), std::max(row[i], row[j]))];
      }
    }
  }
  tokens_[size_t(layer)] += rows;
}

uint64_t CoactivationProfile::coactivation(int layer, int a, int b) const {
  if (a == b) return 0;
  return pairs_[pair_index(layer, std::min(a, b), std::max(a, b))];
}

json CoactivationProfile::to_json() const {
  json layers = json::array();
  const int E = fuel_.experts;
  for (int l = 0; l < fuel_.layers; ++l) {
    json freq = json::array(), pairs = json::array();
    for (int e = 0; e < E; ++e) freq.push_back(frequency(l, e));
    for (int a = 0; a < E; ++a) {
      json row = json::array();
      for (int b = a + 1; b < E; ++b) row.push_back(pairs_[pair_index(l, a, b)]);
      pairs.push_back(std::move(row));
    }
    layers.push_back({{"layer", l}, {"tokens", tokens_[size_t(l)]}, {"frequency", std::move(freq)}, {"pairs", std::move(pairs)}});
  }
  return json{{"rocket_coactivation_version", kCoactivationVersion},
              {"fuel",
               {{"architecture", fuel_.architecture},
                {"chemistry_fingerprint", fuel_.chemistry_fingerprint},
                {"fuel_fingerprint", fuel_.fuel_fingerprint},
                {"layers", fuel_.layers},
                {"experts", fuel_.experts},
                {"top_k", fuel_.top_k}}},
              {"corpus",
               {{"path", corpus_.path}, {"entries", corpus_.entries}, {"tokens", corpus_.tokens}, {"fnv64", corpus_.fnv64}}},
              {"layers", std::move(layers)}};
}

CoactivationProfile CoactivationProfile::from_json(const json& j, const std::string& path) {
  CoactivationProfile p;
  try {
    const int version = number(j.at("rocket_coactivation_version"));
    if (version != kCoactivationVersion)
      fail("{}: co-activation profile version {} (this build reads version {})", path, version, kCoactivationVersion);
    const json& f = j.at("fuel");
    p.fuel_ = ProfiledFuel{f.at("architecture"), f.at("chemistry_fingerprint"), f.at("fuel_fingerprint"),
                           number(f.at("layers")), number(f.at("experts")), number(f.at("top_k"))};
    const int L = p.fuel_.layers, E = p.fuel_.experts, K = p.fuel_.top_k;
    if (L < 1 || E < 2 || K < 1 || K > E)
      fail("{}: fuel.layers {}, fuel.experts {}, fuel.top_k {}: not a sparse MoE fuel", path, L, E, K);
    const json& c = j.at("corpus");
    p.corpus_ = ProfiledCorpus{c.at("path"), number(c.at("entries")), number(c.at("tokens")), c.at("fnv64")};
    const json& layers = j.at("layers");
    if (!layers.is_array() || int(layers.size()) != L)
      fail("{}: {} entries under 'layers', fuel.layers says {}", path, layers.is_array() ? layers.size() : 0, L);
    p.tokens_.assign(size_t(L), 0);
    p.frequency_.assign(size_t(L) * E, 0);
    p.pairs_.assign(size_t(L) * E * E, 0);
    for (int l = 0; l < L; ++l) {
      const json& x = layers[size_t(l)];
      if (const int layer = number(x.at("layer")); layer != l) fail("{}: layers[{}] is for layer {}", path, l, layer);
      const int64_t tokens = number(x.at("tokens"));
      if (tokens < 0) fail("{}: layers[{}].tokens is negative", path, l);
      p.tokens_[size_t(l)] = tokens;
      const auto freq = numbers<std::vector<uint64_t>>(x.at("frequency"));
      if (int(freq.size()) != E) fail("{}: layers[{}].frequency has {} counts for {} experts", path, l, freq.size(), E);
      uint64_t sum = 0;
      for (int e = 0; e < E; ++e) {
        if (freq[size_t(e)] > uint64_t(tokens))
          fail("{}: layers[{}].frequency[{}] = {} exceeds the layer's {} tokens", path, l, e, freq[size_t(e)], tokens);
        p.frequency_[p.index(l, e)] = freq[size_t(e)];
        sum += freq[size_t(e)];
      }
      if (sum != uint64_t(tokens) * uint64_t(K))
        fail("{}: layers[{}]: frequencies sum to {}, not tokens {} x top_k {}", path, l, sum, tokens, K);
      const json& pairs = x.at("pairs");
      if (!pairs.is_array() || int(pairs.size()) != E) fail("{}: layers[{}].pairs must have {} rows", path, l, E);
      for (int a = 0; a < E; ++a) {
        const auto row = numbers<std::vector<uint64_t>>(pairs[size_t(a)]);
        if (int(row.size()) != E - a - 1)
          fail("{}: layers[{}].pairs[{}] has {} counts, the upper triangle has {}", path, l, a, row.size(), E - a - 1);
        for (int b = a + 1; b < E; ++b) {
          const uint64_t n = row[size_t(b - a - 1)];
          if (n > std::min(freq[size_t(a)], freq[size_t(b)]))
            fail("{}: layers[{}]: experts {} and {} co-activate {} times, more than either is chosen", path, l, a, b, n);
          p.pairs_[p.pair_index(l, a, b)] = n;
        }
      }
    }
  } catch (const json::exception& e) {
    fail("{}: malformed co-activation profile: {}", path, e.what());
  }
  return p;
}

CoactivationProfile CoactivationProfile::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("{}: cannot open the co-activation profile", path);
  const json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("{}: not valid JSON", path);
  return from_json(j, path);
}

void CoactivationProfile::save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << to_json().dump() << "\n";
    if (!f.flush()) fail("{}: write failed", tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail("{}: cannot rename into place: {}", path, ec.message());
}

std::string fuel_fingerprint(const Chemistry& chem,
                             const std::function<std::span<const uint8_t>(const std::string&)>& router) {
  Fnv64 h;
  h.update(chem.fingerprint());
  for (int l = 0; l < chem.layers; ++l) {
    const std::span<const uint8_t> w = router(fmt::format("layers.{}.mlp.gate.weight", l));
    h.update(w.data(), w.size());
  }
  return fmt::format("{:016x}", h.digest());
}

std::string check_profile_fits(const CoactivationProfile& profile, const Chemistry& chem, const std::string& fuel_fp,
                               const std::string& path) {
  const ProfiledFuel& p = profile.fuel();
  if (p.architecture != chem.architecture || p.layers != chem.layers || p.experts != chem.experts)
    fail("{}: a profile of another fuel shape ({} with {} layers x {} experts); this fuel is {} with {} layers x {} "
         "experts: its expert ids do not name this fuel's experts. Profile this fuel (rocket profile ENGINE --corpus FILE)",
         path, p.architecture, p.layers, p.experts, chem.architecture, chem.layers, chem.experts);
  std::vector<std::string> notes;
  if (p.chemistry_fingerprint != chem.fingerprint())
    notes.push_back(fmt::format("chemistry {} (this fuel: {}; top-{} vs top-{})", p.chemistry_fingerprint, chem.fingerprint(),
                                p.top_k, chem.top_k));
  if (p.fuel_fingerprint != fuel_fp)
    notes.push_back(fmt::format("fuel {} (this fuel: {})", p.fuel_fingerprint, fuel_fp));
  if (notes.empty()) return "";
  std::string s = "recorded from another fuel of this shape: ";
  for (size_t i = 0; i < notes.size(); ++i) s += (i ? ", " : "") + notes[i];
  return s + "; the engine stays correct, the placement only loses locality";
}

}  // namespace rocket
