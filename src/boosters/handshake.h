// The handshake between the replicated front and its replicas: each replica reports, on
// GET /handshake, the identity and constants of the plan it runs and what it sees of its booster;
// the front admits a replica only when they equal its own plan's and its peers' (a rocket is one fuel,
// one engine, N boosters of one kind). A refusal names the field and both values.
//
// Fields, in the order they are compared (the first difference is the one reported):
//   chemistry, fuel_fingerprint, booster, boosters, arrangement    what is burnt, on what
//   alignment, kv_page_tokens, kv_page_bytes, max_context,          plan constants peers must share
//   max_streams, prefill_chunk
//   plan_fingerprint                                                everything else the engine runs from
//   device_name, device_count, nccl_version                         the booster as the replica sees it
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "boosters/topology.h"
#include "plan/plan.h"

namespace rocket {

constexpr int kHandshakeVersion = 1;

struct Handshake {
  std::string chemistry;         // Chemistry::fingerprint()
  std::string fuel_fingerprint;  // fuel/coactivation.h: the weights' routers, from the engine's blob
  std::string booster;
  int boosters = 1;
  std::string arrangement = kReplicated;
  uint64_t alignment = 0;        // the engine's kAlign
  int kv_page_tokens = 0;
  uint64_t kv_page_bytes = 0;
  int max_context = 0, max_streams = 0, prefill_chunk = 0;
  std::string plan_fingerprint;  // Plan::plan_fingerprint()
  std::string device_name;
  int device_count = 0;
  std::string nccl_version;      // the NCCL an engine links, "none" when it links none

  nlohmann::ordered_json to_json() const;
  // Error naming the missing or mistyped field.
  static Handshake from_json(const nlohmann::json& j);
};

// What an engine running `plan` from `engine_dir` reports, on a booster seen as `machine`.
Handshake handshake_of(const Plan& plan, const std::filesystem::path& engine_dir, const Topology& machine);

// The fuel fingerprint of an engine directory's blob: its routers read at their plan offsets.
std::string blob_fuel_fingerprint(const Plan& plan, const std::filesystem::path& blob_path);

// Who holds each value, for messages: "max_context: 512 on replica 1, 1024 in the plan".
struct Labels {
  std::string got = "on the replica", want = "in the plan";
};

// The first plan field (chemistry .. plan_fingerprint) in which `got` differs from `want`, naming
// both values, then the device name against a plan that records one (`plan_device`); "" when none
// differs.
std::string plan_difference(const Handshake& want, const Handshake& got, const std::string& plan_device = "",
                            const Labels& labels = {});
// As plan_difference, then the booster fields (device_name, device_count, nccl_version): peers must
// agree on every field.
std::string peer_difference(const Handshake& want, const Handshake& got, const Labels& labels = {});

// The NCCL version this binary links: "none" (no engine links NCCL until the split engine does).
std::string linked_nccl_version();

}  // namespace rocket
