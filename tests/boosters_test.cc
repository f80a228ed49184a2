// The rocket's boosters in the plan (plan.boosters, plan.expert_order): the default plan is the one
// every build wrote before them, byte for byte; the new fields' round trip and refusals; engine.h's
// expert-unit table; upright's refusals (a split plan, an order the engine does not map); what launch
// and the front need of the machine (boosters/topology.h); the handshake and the front's admission.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "error_of.h"
#include "boosters/handshake.h"
#include "boosters/topology.h"
#include "compiler/codegen.h"
#include "compiler/kernel_selection.h"
#include "compiler/memory_map.h"
#include "compiler/placement.h"
#include "core/error.h"
#include "engine/upright.h"
#include "front/admission.h"
#include "fuel/forge.h"
#include "test_paths.h"

namespace rocket {
namespace {

Chemistry tiny() { return chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json"); }

using test::error_of;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Four groups of experts, weights 5, 3, 2, 7 in layer 0 (rotated per layer), as placement_test.cc.
CoactivationProfile grouped() {
  const std::vector<std::vector<int>> groups = {{1, 4, 9, 12}, {2, 6, 10, 15}, {0, 3, 5, 7}, {8, 11, 13, 14}};
  const int weights[] = {5, 3, 2, 7};
  const Chemistry c = tiny();
  CoactivationProfile p(c, "fuel");
  for (int l = 0; l < c.layers; ++l)
    for (size_t g = 0; g < groups.size(); ++g)
      for (int t = 0; t < weights[g]; ++t) p.add(l, groups[(g + size_t(l)) % groups.size()].data(), 1, 4);
  return p;
}

// A split host plan of the tiny chemistry over `boosters`, placed from `profile` (or the default), as
// `rocket build --boosters N --arrangement split [--coactivation]` plans it.
Plan split_plan(int boosters, const CoactivationProfile* profile) {
  const Chemistry c = tiny();
  PlanOptions po;
  PlanBoosters b;
  b.count = boosters;
  b.arrangement = kSplit;
  std::vector<std::vector<int>> units;
  bool identity = true;
  for (int l = 0; l < c.layers; ++l) {
    b.placement.push_back(place_experts(profile, l, c.experts, boosters));
    std::vector<int> order;
    for (const auto& on : b.placement.back()) order.insert(order.end(), on.begin(), on.end());
    for (int e = 0; e < c.experts; ++e) identity = identity && order[size_t(e)] == e;
    units.push_back(units_of_order(order));
  }
  if (!identity) po.expert_units = units;
  Plan p = plan_memory(c, po);
  p.boosters = b;
  if (!identity) p.expert_order.source = "/profiles/tiny.json";
  plan_split(p);
  p.validate("split");
  return p;
}

TEST(BoostersPlan, DefaultPlanIsThePlanBeforeBoosters) {
  // tests/fixtures/plans/tiny_host_bf16.json is the plan.json `rocket build FUEL --booster host
  // --no-weights` wrote before plans had boosters or an expert order (commit eac2384; only its
  // fuel_dir rewritten to /fuels/tiny): a default build still writes it byte for byte. This is a
  // change detector, not a correctness check: it fails on any change to the default plan, right or
  // wrong, and says nothing about whether the plan is right (plan_properties_test.cc checks that,
  // this fixture included). A deliberate change to the default plan rewrites the fixture.
  std::ifstream f(test::test_data() + "/fixtures/plans/tiny_host_bf16.json");
  ASSERT_TRUE(f) << "fixture missing";
  std::stringstream want;
  want << f.rdbuf();
  Plan p = plan_memory(tiny(), PlanOptions{});
  p.fuel_dir = "/fuels/tiny";
  p.kernels = select_kernels(p);
  EXPECT_EQ(p.to_json().dump(1) + "\n", want.str());
  EXPECT_FALSE(p.boosters.present());
  // ... and reads back as one replicated booster in the identity order.
  const Plan q = Plan::from_json(nlohmann::json::parse(want.str()), "fixture");
  EXPECT_EQ(q.boosters.count, 1);
  EXPECT_EQ(q.boosters.arrangement, kReplicated);
  EXPECT_TRUE(q.expert_order.units.empty());
  EXPECT_EQ(q.expert_unit(3, 11), 11);
}

TEST(BoostersPlan, ReplicatedAndSplitRoundTrip) {
  const CoactivationProfile profile = grouped();
  for (const Plan& p : {split_plan(2, &profile), split_plan(4, nullptr)}) {
    const Plan q = Plan::from_json(p.to_json(), "round trip");
    EXPECT_EQ(q.boosters, p.boosters);
    EXPECT_EQ(q.expert_order, p.expert_order);
    EXPECT_EQ(q.to_json(), p.to_json());
    EXPECT_EQ(q.plan_fingerprint(), p.plan_fingerprint());
  }
  const Plan two = split_plan(2, &profile);
  EXPECT_EQ(two.boosters.placement[0][0], (std::vector<int>{8, 11, 13, 14, 0, 3, 5, 7}));
  EXPECT_EQ(two.expert_unit(0, 8), 0);
  EXPECT_EQ(two.expert_unit(0, 1), 8);  // booster 1's first
  // One booster's residency: the arena less 8 of 16 experts in each of 4 layers.
  const uint64_t stride = two.tensor("layers.0.mlp.experts.11.gate_proj.weight").offset -
                          two.tensor("layers.0.mlp.experts.8.gate_proj.weight").offset;
  EXPECT_EQ(two.boosters.residency, two.arena_bytes - 8 * 4 * stride);
  EXPECT_EQ(two.boosters.exchange.decode_rows, 32 * 4);
  EXPECT_EQ(two.boosters.exchange.row_bytes, 128u * 4);
  // The default placement keeps the identity order: no expert_order is written.
  EXPECT_TRUE(split_plan(4, nullptr).expert_order.units.empty());
  EXPECT_FALSE(split_plan(4, nullptr).to_json().contains("expert_order"));

  Plan replicated = plan_memory(tiny(), PlanOptions{});
  replicated.boosters.count = 3;
  const Plan r = Plan::from_json(replicated.to_json(), "replicated");
  EXPECT_EQ(r.boosters.count, 3);
  EXPECT_EQ(r.boosters.arrangement, kReplicated);
  EXPECT_FALSE(replicated.to_json()["boosters"].contains("placement"));
  // The plan fingerprint covers the engine's inputs, not where the fuel lay.
  Plan moved = replicated;
  moved.fuel_dir = "/elsewhere";
  EXPECT_EQ(moved.plan_fingerprint(), replicated.plan_fingerprint());
  moved.boosters.count = 2;
  EXPECT_NE(moved.plan_fingerprint(), replicated.plan_fingerprint());
}

TEST(BoostersPlan, RefusesInconsistentBoostersAndOrders) {
  const CoactivationProfile profile = grouped();
  const nlohmann::json good = split_plan(2, &profile).to_json();
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    return error_of([&] { Plan::from_json(j, "plan.json"); });
  };
  EXPECT_TRUE(has(refused([](auto& j) { std::swap(j["boosters"]["placement"][0][0][0], j["boosters"]["placement"][0][1][0]); }),
                  "expert order says"));
  EXPECT_TRUE(has(refused([](auto& j) { j["boosters"]["placement"][1][0].erase(0); }), "holds 7 experts"));
  EXPECT_TRUE(has(refused([](auto& j) { j["expert_order"]["units"][2][0] = j["expert_order"]["units"][2][1]; }),
                  "not a permutation"));
  EXPECT_TRUE(has(refused([](auto& j) { j["boosters"]["count"] = 3; }), "do not split evenly"));
  EXPECT_TRUE(has(refused([](auto& j) { j["boosters"]["arrangement"] = "sideways"; }), "sideways"));
  EXPECT_TRUE(has(refused([](auto& j) { j["boosters"]["exchange"]["decode_rows"] = 7; }), "exchange"));
  EXPECT_TRUE(has(refused([](auto& j) { j["boosters"]["residency"] = 12345; }), "residency"));
  // The units must be where the blob holds the experts.
  EXPECT_TRUE(has(refused([](auto& j) { std::swap(j["expert_order"]["units"][0][8], j["expert_order"]["units"][0][1]); }),
                  "does not hold the experts in the plan's expert order"));
  EXPECT_TRUE(has(refused([](auto& j) {
                    j["boosters"] = {{"count", 1}, {"arrangement", "replicated"}};
                  }),
                  "for one replicated booster"));
  EXPECT_TRUE(has(refused([](auto& j) {
                    j["boosters"]["count"] = 1;
                  }),
                  "split arrangement over 1 booster"));
}

TEST(BoostersPlan, EngineHeaderMapsExpertsToUnits) {
  const CoactivationProfile profile = grouped();
  const Plan p = split_plan(2, &profile);
  const std::string h = generate_engine_header(p);
  // Layer 0: booster 0 holds 8,11,13,14,0,3,5,7 (units 0..7), booster 1 1,4,9,12,2,6,10,15 (8..15).
  EXPECT_TRUE(has(h, "constexpr int kExpertUnit[kLayers][kExperts] = {\n  {4, 8, 12, 5, 9, 6, 13, 7, 0, 10, 14, 1, 11, 2, 3, 15},"))
      << h.substr(h.find("kExpertUnit"), 200);
  // kLayer[0].experts is unit 0's offset, expert 8's.
  const uint64_t unit0 = p.tensor("layers.0.mlp.experts.8.gate_proj.weight").offset;
  EXPECT_TRUE(has(h, std::to_string(unit0) + "ull},\n")) << "layer 0's experts base";
  const std::string identity = generate_engine_header(plan_memory(tiny(), PlanOptions{}));
  EXPECT_TRUE(has(identity, "  {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},"));
}

TEST(BoostersPlan, UprightRefusesWhatTheEngineDoesNotRun) {
  const CoactivationProfile profile = grouped();
  const Plan split = split_plan(2, &profile);
  EngineBuild built{.fingerprint = split.fingerprint,
                    .booster = split.booster,
                    .blob_bytes = split.blob_bytes,
                    .arena_bytes = split.arena_bytes,
                    .slots = split.max_streams + 1,
                    .pages_per_stream = (split.max_context + split.kv_page_tokens - 1) / split.kv_page_tokens,
                    .kv_layers = split.kv_layers(),
                    .maps_expert_units = true,
                    .expert_units = split.expert_order.units};
  EXPECT_TRUE(has(error_of([&] { check_plan(split, built); }), "the plan is split over 2 boosters, this engine was built for one"));
  EngineBuild split_built = built;  // the host engine generated from the split plan
  split_built.split_boosters = 2;
  EXPECT_EQ(error_of([&] { check_plan(split, split_built); }), "");
  Plan gpu_split = split;
  gpu_split.booster = "h200";
  split_built.booster = "h200";
  EXPECT_TRUE(has(error_of([&] { check_plan(gpu_split, split_built); }), "the h200 one (NCCL all-to-all) is not built yet"));
  Plan ordered = split;  // the same blob as one replicated booster
  ordered.boosters = PlanBoosters{};
  EXPECT_EQ(error_of([&] { check_plan(ordered, built); }), "");
  EXPECT_TRUE(has(error_of([&] { check_plan(ordered, EngineBuild{split_built.fingerprint, "host", built.blob_bytes,
                                                                 built.arena_bytes, built.slots, built.pages_per_stream,
                                                                 built.kv_layers, true, built.expert_units, 2}); }),
                  "the plan is one engine per booster, this engine was built split over 2 boosters"));
  EngineBuild unmapped = built;  // an engine whose kernels take unit = expert id (the h200's today)
  unmapped.maps_expert_units = false;
  unmapped.expert_units.clear();
  EXPECT_TRUE(has(error_of([&] { check_plan(ordered, unmapped); }), "does not map expert ids to units"));
  Plan h200_ordered = ordered;  // its blob's routers choose units (Plan::router_in_unit_order)
  h200_ordered.booster = unmapped.booster = "h200";
  EXPECT_EQ(error_of([&] { check_plan(h200_ordered, unmapped); }), "");
  unmapped.booster = "host";
  EngineBuild other = built;  // an engine generated from another order
  std::swap(other.expert_units[1][0], other.expert_units[1][1]);
  EXPECT_TRUE(has(error_of([&] { check_plan(ordered, other); }), "layer 1's expert 0 at unit"));
}

TEST(BoostersTopology, LaunchNeedsThePlansBoosters) {
  Plan host = plan_memory(tiny(), PlanOptions{});
  const Topology cpu{.kind = "host", .devices = 1, .device_name = "AMD EPYC", .why_none = ""};
  EXPECT_EQ(launch_mismatch(host, cpu), "");
  host.boosters.count = 2;  // host replicas share the CPU: the count is not the machine's
  EXPECT_EQ(launch_mismatch(host, cpu), "");

  Plan gpu = plan_memory(tiny(), PlanOptions{.booster = "h200"});
  gpu.boosters.count = 2;
  gpu.boosters.device_name = "NVIDIA H200";
  EXPECT_TRUE(has(launch_mismatch(gpu, cpu), "the plan is for h200 boosters, this machine offers host"));
  const Topology none{.kind = "h200", .devices = 0, .device_name = "", .why_none = "no CUDA-capable device is detected"};
  EXPECT_TRUE(has(launch_mismatch(gpu, none), "no GPU is visible (no CUDA-capable device is detected)"));
  const Topology h100{.kind = "h200", .devices = 1, .device_name = "NVIDIA H100 80GB HBM3", .why_none = ""};
  EXPECT_TRUE(has(launch_mismatch(gpu, h100), "the plan's boosters are 'NVIDIA H200', this machine's GPU is 'NVIDIA H100"));
  const Topology one{.kind = "h200", .devices = 1, .device_name = "NVIDIA H200", .why_none = ""};
  EXPECT_EQ(launch_mismatch(gpu, one), "");  // one replica: one GPU
  gpu.boosters.arrangement = kSplit;  // one engine over both: both GPUs
  EXPECT_TRUE(has(launch_mismatch(gpu, one), "the split engine: 2 h200 GPUs needed, this machine shows 1"));
  const Topology four{.kind = "h200", .devices = 4, .device_name = "NVIDIA H200", .why_none = ""};
  EXPECT_TRUE(has(launch_mismatch(gpu, four), "spans 2 GPUs, this machine shows 4"));
  EXPECT_TRUE(has(unbuilt_arrangement(gpu), "the h200 one (NCCL all-to-all) is not built yet"));
  EXPECT_EQ(unbuilt_arrangement(host), "");
  host.boosters.arrangement = kSplit;  // the host split engine exists
  EXPECT_EQ(unbuilt_arrangement(host), "");
  EXPECT_EQ(launch_mismatch(host, cpu), "");
}

TEST(BoostersTopology, FrontNeedsThePlansCount) {
  Plan host = plan_memory(tiny(), PlanOptions{});
  const Topology cpu{.kind = "host", .devices = 1, .device_name = "AMD EPYC", .why_none = ""};
  EXPECT_EQ(front_mismatch(host, 3, &cpu), "");  // a one-booster plan replicated ad hoc
  host.boosters.count = 2;
  EXPECT_EQ(front_mismatch(host, 2, &cpu), "");
  EXPECT_TRUE(has(front_mismatch(host, 3, &cpu), "a rocket of 2 replicated boosters; fronting 3 replicas"));
  EXPECT_TRUE(has(front_mismatch(host, 1, nullptr), "fronting 1 replica of it"));
  Plan gpu = plan_memory(tiny(), PlanOptions{.booster = "h200"});
  gpu.boosters.count = 4;
  gpu.boosters.device_name = "NVIDIA H200";
  const Topology two{.kind = "h200", .devices = 2, .device_name = "NVIDIA H200", .why_none = ""};
  EXPECT_TRUE(has(front_mismatch(gpu, 4, &two), "4 replicas: 4 h200 GPUs needed, this machine shows 2"));
  EXPECT_EQ(front_mismatch(gpu, 4, nullptr), "");  // replicas elsewhere: their handshakes tell
  gpu.boosters.arrangement = kSplit;
  EXPECT_TRUE(has(front_mismatch(gpu, 4, &two), "not replicas for a front"));
}

Handshake handshake() {
  return Handshake{.chemistry = "32e8fa349e3f5d90",
                   .fuel_fingerprint = "0c18afd8fbc64901",
                   .booster = "h200",
                   .boosters = 2,
                   .arrangement = kReplicated,
                   .alignment = 65536,
                   .kv_page_tokens = 64,
                   .kv_page_bytes = 65536,
                   .max_context = 9216,
                   .max_streams = 32,
                   .prefill_chunk = 2048,
                   .plan_fingerprint = "0eb32ba7daa1e640",
                   .device_name = "NVIDIA H200",
                   .device_count = 1,
                   .nccl_version = "none"};
}

TEST(BoostersHandshake, RoundTripAndTheFieldThatDiffers) {
  const Handshake h = handshake();
  EXPECT_EQ(Handshake::from_json(nlohmann::json::parse(h.to_json().dump())).to_json(), h.to_json());
  EXPECT_TRUE(has(error_of([&] {
                    nlohmann::json j = h.to_json();
                    j.erase("kv_page_bytes");
                    Handshake::from_json(j);
                  }),
                  "kv_page_bytes"));
  EXPECT_EQ(plan_difference(h, h), "");
  Handshake pages = h;
  pages.kv_page_tokens = 128;
  pages.kv_page_bytes = 131072;
  pages.plan_fingerprint = "1111111111111111";
  // The first field in the order, both values, who holds which.
  EXPECT_EQ(plan_difference(h, pages, "", {"on replica 1", "in the plan"}),
            "kv_page_tokens: 128 on replica 1, 64 in the plan");
  Handshake chem = h;
  chem.chemistry = "ffffffffffffffff";
  EXPECT_EQ(plan_difference(h, chem), "chemistry: 'ffffffffffffffff' on the replica, '32e8fa349e3f5d90' in the plan");
  // Machine fields are the peers' to compare, and the plan's device name where it records one.
  Handshake other = h;
  other.device_name = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(plan_difference(h, other), "");
  EXPECT_TRUE(has(plan_difference(h, other, "NVIDIA H200"), "device_name: 'NVIDIA H100 80GB HBM3' on the replica, 'NVIDIA H200'"));
  EXPECT_TRUE(has(peer_difference(h, other), "device_name"));
  Handshake nccl = h;
  nccl.nccl_version = "2.21.5";
  EXPECT_TRUE(has(peer_difference(h, nccl, {"on replica 2", "on replica 0"}), "nccl_version: '2.21.5' on replica 2, 'none' on replica 0"));
  Handshake count = h;
  count.device_count = 8;
  EXPECT_TRUE(has(peer_difference(h, count), "device_count: 8"));
}

TEST(BoostersHandshake, AdmissionAgainstThePlanAndTheFirstPeer) {
  Handshake plan = handshake();
  plan.device_name.clear();  // the front's plan implies no device of its own
  Admission a(plan, "", "/engines/a3b");
  EXPECT_EQ(a.admit(0, handshake()), "");
  Handshake context = handshake();
  context.max_context = 4096;
  EXPECT_EQ(a.admit(1, context),
            "differs from the front's plan: max_context: 4096 on replica 1, 9216 in the plan of /engines/a3b");
  Handshake gpu = handshake();
  gpu.device_name = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(a.admit(2, gpu), "differs from replica 0: device_name: 'NVIDIA H100 80GB HBM3' on replica 2, 'NVIDIA H200' on replica 0");
  EXPECT_EQ(a.admit(3, handshake()), "");
  Admission named(plan, "NVIDIA H200", "/engines/a3b");
  EXPECT_TRUE(has(named.admit(0, gpu), "'NVIDIA H200' in the plan of /engines/a3b"));
}

}  // namespace
}  // namespace rocket
