// core/json_number.h: every number a file or a peer gives Rocket is read exactly or refused, never
// cast out of range (undefined behaviour) or wrapped; and the readers built on it (the plan, its
// chemistry, a co-activation profile, a handshake) refuse such a value as malformed, naming it.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "error_of.h"
#include "boosters/handshake.h"
#include "compiler/memory_map.h"
#include "core/error.h"
#include "core/json_number.h"
#include "fuel/coactivation.h"
#include "fuel/forge.h"

namespace rocket {
namespace {

using nlohmann::json;

bool refused(const std::function<void()>& f) {
  try {
    f();
  } catch (const json::type_error&) {
    return true;
  }
  return false;
}

using test::error_of;

TEST(JsonNumber, ReadsWhatFitsExactly) {
  EXPECT_EQ(json_number<int>(json::parse("2147483647")), 2147483647);
  EXPECT_EQ(json_number<int>(json::parse("-2147483648")), std::numeric_limits<int>::min());
  EXPECT_EQ(json_number<uint64_t>(json::parse("18446744073709551615")), UINT64_MAX);
  EXPECT_EQ(json_number<int64_t>(json::parse("-9223372036854775808")), INT64_MIN);
  EXPECT_EQ(json_number<uint64_t>(json(int64_t(7))), 7u);  // built in code as signed
  EXPECT_EQ(json_number<double>(json::parse("3")), 3.0);
  EXPECT_FLOAT_EQ(json_number<float>(json::parse("0.25")), 0.25f);
  EXPECT_TRUE(json_number<bool>(json::parse("true")));
  const int assigned = number(json::parse("41"));
  EXPECT_EQ(assigned, 41);
  EXPECT_EQ((numbers<std::vector<std::vector<int>>>(json::parse("[[1,2],[],[3]]"))),
            (std::vector<std::vector<int>>{{1, 2}, {}, {3}}));
}

TEST(JsonNumber, RefusesWhatDoesNotFit) {
  EXPECT_TRUE(refused([] { json_number<uint64_t>(json::parse("1.22222e+47")); }));  // the plan fuzzer's find
  EXPECT_TRUE(refused([] { json_number<int64_t>(json::parse("-1e300")); }));
  EXPECT_TRUE(refused([] { json_number<int>(json::parse("4294967297")); }));  // would wrap to 1
  EXPECT_TRUE(refused([] { json_number<int>(json::parse("-2147483649")); }));
  EXPECT_TRUE(refused([] { json_number<uint64_t>(json::parse("-1")); }));
  EXPECT_TRUE(refused([] { json_number<uint32_t>(json::parse("4294967296")); }));
  EXPECT_TRUE(refused([] { json_number<int>(json::parse("2.0")); }));
  EXPECT_TRUE(refused([] { json_number<int>(json::parse("\"3\"")); }));
  EXPECT_TRUE(refused([] { json_number<int>(json::parse("true")); }));
  EXPECT_TRUE(refused([] { json_number<bool>(json::parse("1")); }));
  EXPECT_TRUE(refused([] { json_number<float>(json::parse("1e300")); }));  // a float cannot hold it
  EXPECT_TRUE(refused([] { json_number<double>(json::parse("null")); }));
  EXPECT_TRUE(refused([] { numbers<std::vector<int>>(json::parse("[1, 2.5]")); }));
  EXPECT_TRUE(refused([] { numbers<std::vector<int>>(json::parse("{\"a\": 1}")); }));
}

Chemistry tiny() { return chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json"); }

TEST(JsonNumber, PlanRefusesANumberItsFieldCannotHold) {
  PlanOptions po;
  po.booster = "host";
  const json good = plan_memory(tiny(), po).to_json();
  auto error = [&](const std::function<void(json&)>& edit) {
    json j = json::parse(good.dump());
    edit(j);
    return error_of([&] { Plan::from_json(j, "plan.json"); });
  };
  EXPECT_EQ(error([](json&) {}), "");
  for (const auto& edit : std::vector<std::function<void(json&)>>{
           [](json& j) { j["blob_bytes"] = 1.22222e+47; },
           [](json& j) { j["max_streams"] = 4294967297ull; },
           [](json& j) { j["memory_map"]["tensors"][0]["offset"] = -1; },
           [](json& j) { j["memory_map"]["tensors"][0]["shape"][0] = 1e30; },
           [](json& j) { j["kv_cache"]["pages"] = 2.5; },
           [](json& j) { j["chemistry"]["vocab_size"] = 1e20; },
           [](json& j) { j["chemistry"]["rms_norm_eps"] = "small"; },
           [](json& j) { j["static_fire"]["margin"] = 1e300; },
       }) {
    const std::string e = error(edit);
    EXPECT_NE(e.find("malformed plan"), std::string::npos) << e;
  }
}

TEST(JsonNumber, ProfileAndHandshakeRefuseThem) {
  const Chemistry c = tiny();
  CoactivationProfile p(c, "fuel");
  const int chosen[] = {0, 1, 2, 3};
  p.add(0, chosen, 1, 4);
  const json good = p.to_json();
  EXPECT_EQ(error_of([&] { CoactivationProfile::from_json(good, "profile.json"); }), "");
  json bad = good;
  bad["layers"][0]["tokens"] = 1e40;
  EXPECT_NE(error_of([&] { CoactivationProfile::from_json(bad, "profile.json"); }).find("1e+40"), std::string::npos);

  Handshake h;
  h.chemistry = c.fingerprint();
  json hj = json::parse(h.to_json().dump());
  hj["kv_page_bytes"] = -4096;
  EXPECT_NE(error_of([&] { Handshake::from_json(hj); }).find("malformed handshake"), std::string::npos);
}

}  // namespace
}  // namespace rocket
