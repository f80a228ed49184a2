// Topology: the boosters of one kind this process sees, and whether they are the ones a plan was
// built for (docs/glossary.md: a rocket is N boosters of one kind, and its booster count is part
// of its identity). Launch checks it before upright maps anything; the front checks it before it
// spawns one replica per GPU.
//
// A host machine is one host booster (its CPU) whatever the plan's count: host replicas share the CPU
// (CI runs two behind one front), so a host plan's count is never checked against the machine.
#pragma once

#include <string>

#include "plan/plan.h"

namespace rocket {

struct Topology {
  std::string kind;         // "host" | "h200"
  int devices = 0;          // host: 1, the CPU; h200: the CUDA devices visible (CUDA_VISIBLE_DEVICES honoured)
  std::string device_name;  // host: the CPU model; h200: device 0's name; "" when there is none
  std::string why_none;     // devices == 0: why (the CUDA runtime's error, or a build without CUDA)
};

// What this process sees of boosters of `kind`.
Topology visible_topology(const std::string& kind);

// Why no engine runs this plan yet ("" when one does): the split arrangement on h200 boosters, whose
// engine (one engine spanning the GPUs over NCCL) is not built; the host booster's split engine is.
// Upright, launch and the front refuse it with this, rather than run it on one booster as another rocket.
std::string unbuilt_arrangement(const Plan& plan);

// What one `launch` (one engine) needs of the machine; "" when it has it, else the mismatch naming
// both sides. The plan's kind must be the machine's; an h200 plan needs a visible GPU, of the plan's
// device name when the plan records one; a split plan needs exactly its count of GPUs (its one
// engine spans them). A replicated plan's launch is one replica: it needs one booster.
std::string launch_mismatch(const Plan& plan, const Topology& machine);

// What `rocket front` needs to front `replicas` replicas of the plan: a replicated plan (a split one
// is no replicas); of more than one booster, exactly its count. With `machine` (the front spawns
// them, each a launch on one GPU of it): an h200 plan needs that many visible GPUs, of its device
// name when it records one. Null: they run elsewhere, and their handshakes tell their boosters.
std::string front_mismatch(const Plan& plan, int replicas, const Topology* machine);

}  // namespace rocket
