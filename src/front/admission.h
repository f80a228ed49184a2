// Admission: which replicas the front may route to. A replica is admitted once, on its first healthy
// probe, when its handshake (boosters/handshake.h) matches the front's plan (chemistry, fuel, booster,
// arrangement, plan constants, plan fingerprint; the device name where the plan records one) and the
// replica admitted first (every field, the booster as it sees it too: device name and count, NCCL).
// A refused replica never enters rotation; at startup a refusal stops the front.
//
// Thread safety: admit() may be called from any thread (serialised inside).
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "boosters/handshake.h"

namespace rocket {

class Admission {
 public:
  // `plan`: the handshake the front's own plan implies (its machine fields are not compared);
  // `plan_device`: the device name the plan records, "" when none; `plan_dir` names it in refusals.
  Admission(Handshake plan, std::string plan_device, std::string plan_dir);

  // "" when replica `index` is admitted; otherwise why not, naming the field and both values
  // ("differs from the front's plan: max_context: 512 on replica 1, 1024 in the plan of DIR").
  std::string admit(int index, const Handshake& h);

 private:
  const Handshake plan_;
  const std::string plan_device_, plan_dir_;
  std::mutex mu_;
  std::optional<Handshake> first_;  // the first admitted replica's, which every peer must equal
  int first_index_ = -1;
};

}  // namespace rocket
