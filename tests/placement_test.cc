// The co-activation profile (fuel/coactivation.h) and expert placement from it (compiler/placement.h):
// counting, the file's round trip and refusals, the fit check against a fuel, the one-booster order
// rule and the split placement rule on profiles whose expected outcome is worked by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "compiler/placement.h"
#include "core/error.h"
#include "fuel/coactivation.h"
#include "fuel/forge.h"

namespace rocket {
namespace {

Chemistry tiny() { return chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json"); }

using test::error_of;

// `tokens` tokens in every layer, each routed to one of `groups` (layer l's groups rotated by l, so
// the layers differ), token t to group t % groups.size() unless `weights` says how many of each.
CoactivationProfile grouped(const std::vector<std::vector<int>>& groups, const std::vector<int>& weights) {
  const Chemistry c = tiny();
  CoactivationProfile p(c, "fuel");
  for (int l = 0; l < c.layers; ++l)
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::vector<int>& members = groups[(g + size_t(l)) % groups.size()];
      for (int t = 0; t < weights[g]; ++t) p.add(l, members.data(), 1, int(members.size()));
    }
  return p;
}

const std::vector<std::vector<int>> kGroups = {{1, 4, 9, 12}, {2, 6, 10, 15}, {0, 3, 5, 7}, {8, 11, 13, 14}};

TEST(Coactivation, CountsFrequenciesAndPairs) {
  const Chemistry c = tiny();
  CoactivationProfile p(c, "abc");
  const int rows[2][4] = {{3, 1, 7, 0}, {1, 3, 2, 9}};
  p.add(2, &rows[0][0], 2, 4);
  EXPECT_EQ(p.tokens(2), 2);
  EXPECT_EQ(p.tokens(0), 0);
  EXPECT_EQ(p.frequency(2, 1), 2u);
  EXPECT_EQ(p.frequency(2, 9), 1u);
  EXPECT_EQ(p.frequency(2, 5), 0u);
  EXPECT_EQ(p.coactivation(2, 1, 3), 2u);
  EXPECT_EQ(p.coactivation(2, 3, 1), 2u);  // symmetric
  EXPECT_EQ(p.coactivation(2, 7, 0), 1u);
  EXPECT_EQ(p.coactivation(2, 7, 9), 0u);
  EXPECT_EQ(p.coactivation(2, 1, 1), 0u);
  EXPECT_EQ(p.coactivation(1, 1, 3), 0u);  // another layer
}

TEST(Coactivation, FileRoundTripAndRefusals) {
  CoactivationProfile p = grouped(kGroups, {5, 3, 2, 7});
  p.corpus() = ProfiledCorpus{"corpus.jsonl", 4, 17, "0123456789abcdef"};
  const nlohmann::json j = p.to_json();
  const CoactivationProfile q = CoactivationProfile::from_json(j, "p.json");
  EXPECT_EQ(q.to_json(), j);
  EXPECT_EQ(q.fuel().fuel_fingerprint, "fuel");
  EXPECT_EQ(q.corpus().tokens, 17);
  for (int l = 0; l < q.layers(); ++l)
    for (int a = 0; a < q.experts(); ++a) {
      EXPECT_EQ(q.frequency(l, a), p.frequency(l, a));
      for (int b = 0; b < q.experts(); ++b) EXPECT_EQ(q.coactivation(l, a, b), p.coactivation(l, a, b));
    }
  const std::filesystem::path file = std::filesystem::path(::testing::TempDir()) / "coactivation_round_trip.json";
  p.save(file.string());
  EXPECT_EQ(CoactivationProfile::load(file.string()).to_json(), j);

  auto refused = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json bad = j;
    edit(bad);
    return error_of([&] { CoactivationProfile::from_json(bad, "p.json"); });
  };
  EXPECT_NE(refused([](auto& b) { b["rocket_coactivation_version"] = 9; }).find("version 9"), std::string::npos);
  EXPECT_NE(refused([](auto& b) { b["layers"][1]["frequency"][3] = 1000; }).find("exceeds"), std::string::npos);
  EXPECT_NE(refused([](auto& b) { b["layers"][1]["frequency"][3] = 0; }).find("sum to"), std::string::npos);
  EXPECT_NE(refused([](auto& b) { b["layers"][0]["pairs"][0].push_back(1); }).find("upper triangle"), std::string::npos);
  EXPECT_NE(refused([](auto& b) { b["layers"][0]["pairs"][1][0] = 99; }).find("more than either"), std::string::npos);
  EXPECT_NE(refused([](auto& b) { b["layers"].erase(2); }).find("entries under 'layers'"), std::string::npos);
  EXPECT_NE(refused([](auto& b) { b["fuel"].erase("experts"); }).find("malformed"), std::string::npos);
}

TEST(Coactivation, FitsOnlyAFuelOfItsShape) {
  const Chemistry c = tiny();
  const CoactivationProfile p(c, "fuel-a");
  EXPECT_EQ(check_profile_fits(p, c, "fuel-a", "p.json"), "");
  // Another fuel of the same shape (and another format of it): accepted, the build says what is lost.
  const std::string note = check_profile_fits(p, c, "fuel-b", "p.json");
  EXPECT_NE(note.find("fuel fuel-a (this fuel: fuel-b)"), std::string::npos) << note;
  EXPECT_NE(note.find("only loses locality"), std::string::npos) << note;
  const Chemistry fp8 = chemistry_from_config(forge_config("tiny", 0), WeightFormat::kFP8, "tiny/config.json");
  EXPECT_NE(check_profile_fits(p, fp8, "fuel-a", "p.json").find("chemistry"), std::string::npos);
  // Another shape: refused, naming both.
  const Chemistry deeper = chemistry_from_config(forge_config("tiny", 8), WeightFormat::kBF16, "tiny/config.json");
  const std::string layers = error_of([&] { check_profile_fits(p, deeper, "fuel-a", "p.json"); });
  EXPECT_NE(layers.find("4 layers x 16 experts"), std::string::npos) << layers;
  EXPECT_NE(layers.find("8 layers x 16 experts"), std::string::npos) << layers;
  nlohmann::json config = forge_config("tiny", 0);
  config["num_experts"] = 32;
  const Chemistry wider = chemistry_from_config(config, WeightFormat::kBF16, "wide/config.json");
  EXPECT_NE(error_of([&] { check_profile_fits(p, wider, "fuel-a", "p.json"); }).find("another fuel shape"),
            std::string::npos);
}

TEST(Coactivation, FuelFingerprintFollowsTheRouters) {
  const Chemistry c = tiny();
  std::vector<uint8_t> bytes(64, 7);
  auto fp = [&] {
    return fuel_fingerprint(c, [&](const std::string&) { return std::span<const uint8_t>(bytes); });
  };
  const std::string a = fp();
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(fp(), a);
  bytes[5] = 8;
  EXPECT_NE(fp(), a);
}

// The order rule: the most frequent expert first, then the strongest pair with the last placed.
TEST(Placement, OrderChainsCoactivatedExperts) {
  // Layer 0: groups of weights 5, 3, 2, 7 -> {8,11,13,14} (7) first, then {1,4,9,12} (5),
  // {2,6,10,15} (3), {0,3,5,7} (2); a group's members tie in everything, so by id.
  const CoactivationProfile p = grouped(kGroups, {5, 3, 2, 7});
  EXPECT_EQ(coactivation_order(p, 0), (std::vector<int>{8, 11, 13, 14, 1, 4, 9, 12, 2, 6, 10, 15, 0, 3, 5, 7}));
  // Layer 1 rotates the groups by one: weights 7, 5, 3, 2 on {2,6,10,15}, {0,3,5,7}, {8,11,13,14}, {1,4,9,12}.
  EXPECT_EQ(coactivation_order(p, 1), (std::vector<int>{1, 4, 9, 12, 2, 6, 10, 15, 0, 3, 5, 7, 8, 11, 13, 14}));
  // No tokens: the identity.
  const CoactivationProfile empty(tiny(), "fuel");
  std::vector<int> identity(16);
  for (int e = 0; e < 16; ++e) identity[size_t(e)] = e;
  EXPECT_EQ(coactivation_order(empty, 2), identity);
  EXPECT_EQ(units_of_order(coactivation_order(p, 0))[8], 0);
  EXPECT_EQ(units_of_order(coactivation_order(p, 0))[7], 15);
}

TEST(Placement, ChainFollowsThePairNotTheFrequency) {
  // 3 is the most frequent (7 tokens). 0, 1 and 5 co-activate with it 4 times, 6 only 3 times though it
  // is more frequent (5): the chain takes 0 (the tie on frequency goes to the lower id), then 1 and 5
  // (its pairs); with 5 nothing left co-activates, so the most frequent left, 6, starts the next chain,
  // which follows its pairs 2 and 4, then 7, 8, 9 and the experts no token chose, by id.
  const Chemistry c = tiny();
  CoactivationProfile p(c, "fuel");
  const int a[4] = {3, 5, 0, 1}, b[4] = {3, 6, 2, 4}, d[4] = {6, 7, 8, 9};
  for (int i = 0; i < 4; ++i) p.add(0, a, 1, 4);
  for (int i = 0; i < 3; ++i) p.add(0, b, 1, 4);
  for (int i = 0; i < 2; ++i) p.add(0, d, 1, 4);
  EXPECT_EQ(coactivation_order(p, 0), (std::vector<int>{3, 0, 1, 5, 6, 2, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(Placement, SplitKeepsGroupsTogetherAndBalancesLoad) {
  // Weights 5, 3, 2, 7 (tokens) over 2 boosters of 8 experts: the heaviest group {8,11,13,14} on
  // booster 0, the next {1,4,9,12} on booster 1, then {2,6,10,15} (3) goes to the lighter booster 1,
  // and {0,3,5,7} fills booster 0: loads 4·(7+2) = 36 and 4·(5+3) = 32, within 10% of the mean 34.
  const CoactivationProfile p = grouped(kGroups, {5, 3, 2, 7});
  const auto on = place_experts(&p, 0, 16, 2);
  ASSERT_EQ(on.size(), 2u);
  EXPECT_EQ(on[0], (std::vector<int>{8, 11, 13, 14, 0, 3, 5, 7}));
  EXPECT_EQ(on[1], (std::vector<int>{1, 4, 9, 12, 2, 6, 10, 15}));
  // Four boosters and equally hot groups: a group each (a group's load is the mean, within the bound).
  const CoactivationProfile even = grouped(kGroups, {4, 4, 4, 4});
  const auto four = place_experts(&even, 0, 16, 4);
  EXPECT_EQ(four[0], (std::vector<int>{0, 3, 5, 7}));
  EXPECT_EQ(four[1], (std::vector<int>{1, 4, 9, 12}));
  EXPECT_EQ(four[2], (std::vector<int>{2, 6, 10, 15}));
  EXPECT_EQ(four[3], (std::vector<int>{8, 11, 13, 14}));
  // No profile: contiguous blocks, the identity order.
  const auto blocks = place_experts(nullptr, 0, 16, 2);
  EXPECT_EQ(blocks[0], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(blocks[1], (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(Placement, LoadBoundSplitsAGroupTooHotForOneBooster) {
  // Weights 12, 1, 1, 1: the hot group {8,11,13,14} alone is 48 of 60 activations, over the bound
  // 1.1 · 30 = 33, so it cannot stay on one booster: 8 and 11 (24) fit on booster 0, 13 would make it
  // 36, so 13 goes to booster 1, and 14 follows it there (more affinity on booster 0, 24 to 12, but
  // booster 0 would pass the bound).
  const CoactivationProfile p = grouped({{8, 11, 13, 14}, {1, 4, 9, 12}, {2, 6, 10, 15}, {0, 3, 5, 7}}, {12, 1, 1, 1});
  const auto on = place_experts(&p, 0, 16, 2);
  auto holds = [&](int b, int e) { return std::find(on[size_t(b)].begin(), on[size_t(b)].end(), e) != on[size_t(b)].end(); };
  EXPECT_TRUE(holds(0, 8) && holds(0, 11));
  EXPECT_TRUE(holds(1, 13) && holds(1, 14));
  uint64_t load[2] = {0, 0};
  for (int b = 0; b < 2; ++b)
    for (int e : on[size_t(b)]) load[b] += p.frequency(0, e);
  EXPECT_EQ(load[0] + load[1], 60u);
  EXPECT_LE(std::max(load[0], load[1]), 33u);
  EXPECT_EQ(on[0].size(), 8u);
  EXPECT_EQ(on[1].size(), 8u);
}

}  // namespace
}  // namespace rocket
