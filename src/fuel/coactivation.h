// The co-activation profile: how a fuel routes tokens over a corpus. Per MoE layer, how many tokens
// chose each expert (its frequency) and how many chose each pair of experts together (their
// co-activation: both among one token's top-k). `rocket profile ENGINE --corpus FILE` records it by
// running the fuel; `rocket build --coactivation FILE` reads it to order experts in the blob and to
// place them across boosters (compiler/placement.h). It depends on the weights, not only the
// chemistry: it is the one weight-dependent compiler input, and a performance property only (a
// profile of another fuel of the same shape gives a correct engine that has lost locality).
//
// File (JSON, version kCoactivationVersion):
//   {"rocket_coactivation_version": 1,
//    "fuel": {"architecture", "chemistry_fingerprint", "fuel_fingerprint", "layers", "experts", "top_k"},
//    "corpus": {"path", "entries", "tokens", "fnv64"},          informational
//    "layers": [{"layer": L, "tokens": T,
//                "frequency": [E counts],
//                "pairs": [[count(0,1), count(0,2), ... count(0,E-1)], [count(1,2), ...], ..., []]}, ...]}
// `pairs` is the upper triangle of the symmetric co-activation matrix, row i holding j = i+1 .. E-1;
// count(i, j) <= min(frequency[i], frequency[j]) and sum(frequency) = tokens * top_k.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fuel/chemistry.h"

namespace rocket {

constexpr int kCoactivationVersion = 1;

// What the profile was recorded from: enough to tell a profile of another fuel shape (refused) from
// one of another fuel of the same shape (accepted: locality lost, correctness kept).
struct ProfiledFuel {
  std::string architecture;
  std::string chemistry_fingerprint;  // Chemistry::fingerprint(): shapes and weight format
  std::string fuel_fingerprint;       // fuel_fingerprint(): which weights route the tokens
  int layers = 0, experts = 0, top_k = 0;
};

struct ProfiledCorpus {
  std::string path;
  int64_t entries = 0, tokens = 0;
  std::string fnv64;  // of the corpus file's bytes, 16 hex digits
};

class CoactivationProfile {
 public:
  CoactivationProfile() = default;
  // Empty counts for a fuel of this chemistry (every layer has a sparse MoE block).
  CoactivationProfile(const Chemistry& chem, std::string fuel_fingerprint);

  const ProfiledFuel& fuel() const { return fuel_; }
  ProfiledCorpus& corpus() { return corpus_; }
  const ProfiledCorpus& corpus() const { return corpus_; }
  int layers() const { return fuel_.layers; }
  int experts() const { return fuel_.experts; }

  // One forward pass's routing in `layer`: `rows` tokens, each with its top-k expert ids (distinct,
  // in [0, experts)) at idx[row * k ...]. REQUIRES: k == the profile's top_k.
  void add(int layer, const int* idx, int rows, int k);

  int64_t tokens(int layer) const { return tokens_[size_t(layer)]; }
  uint64_t frequency(int layer, int expert) const { return frequency_[index(layer, expert)]; }
  // Tokens that chose both a and b (symmetric; 0 when a == b).
  uint64_t coactivation(int layer, int a, int b) const;

  nlohmann::json to_json() const;
  // Validates every count's invariants; Error names the file and the field.
  static CoactivationProfile from_json(const nlohmann::json& j, const std::string& path);
  static CoactivationProfile load(const std::string& path);
  void save(const std::string& path) const;  // atomically: a temporary file, then rename

 private:
  size_t index(int layer, int expert) const { return size_t(layer) * size_t(fuel_.experts) + size_t(expert); }
  size_t pair_index(int layer, int a, int b) const {
    return (size_t(layer) * size_t(fuel_.experts) + size_t(a)) * size_t(fuel_.experts) + size_t(b);
  }

  ProfiledFuel fuel_;
  ProfiledCorpus corpus_;
  std::vector<int64_t> tokens_;       // [layer]
  std::vector<uint64_t> frequency_;   // [layer][expert]
  std::vector<uint64_t> pairs_;       // [layer][a][b], a < b only
};

// The identity of a fuel's weights as far as routing goes, cheap enough to compute at every profile,
// build and handshake: FNV-1a 64 of the chemistry fingerprint and every layer's router weight
// (layers.L.mlp.gate.weight in the checkpoint's row order; an h200 blob with an expert order stores
// it in unit order, and blob_fuel_fingerprint reads it back by id), as 16 hex digits. Two fuels that route a
// token differently almost surely differ in some router; a fine-tune that leaves every router alone
// shares it (its profile then differs only through the hidden states feeding the routers).
// `router(name)` returns the bytes of a canonical tensor.
std::string fuel_fingerprint(const Chemistry& chem, const std::function<std::span<const uint8_t>(const std::string&)>& router);

// How a profile fits a fuel about to be built. Error when it is of another shape (architecture,
// layer count or expert count: its expert ids would not name this fuel's experts); otherwise the
// differences that cost only locality, for the build to report ("" when it is this fuel's own).
std::string check_profile_fits(const CoactivationProfile& profile, const Chemistry& chem, const std::string& fuel_fp,
                               const std::string& path);

}  // namespace rocket
