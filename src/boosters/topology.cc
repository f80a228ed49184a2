#include "boosters/topology.h"

#include <fmt/format.h>

#include "boosters/machine.h"
#include "boosters/profile.h"

namespace rocket {

Topology visible_topology(const std::string& kind) {
  Topology t;
  t.kind = kind;
  if (kind == "host") {
    t.devices = 1;
    t.device_name = cpu_model_name();
    return t;
  }
#ifdef ROCKET_HAVE_CUDA
  const std::vector<std::string> names = visible_cuda_devices(&t.why_none);
  t.devices = int(names.size());
  if (!names.empty()) t.device_name = names.front();
  for (const std::string& n : names)
    if (n != t.device_name)  // one kind of booster: a mixed machine shows it in the name
      t.device_name = fmt::format("{} (and {})", t.device_name, n);
#else
  t.why_none = "this rocket was built without nvcc: no CUDA runtime to ask";
#endif
  return t;
}

namespace {

std::string device_mismatch(const Plan& plan, const Topology& m, int needed, const char* who) {
  if (m.kind != plan.booster)
    return fmt::format("the plan is for {} boosters, this machine offers {}", plan.booster, m.kind);
  if (plan.booster == "host") return "";
  if (m.devices == 0) return fmt::format("the plan is for {} boosters and no GPU is visible ({})", plan.booster, m.why_none);
  if (m.devices < needed)
    return fmt::format("{}: {} {} GPUs needed, this machine shows {} (CUDA_VISIBLE_DEVICES honoured)", who, needed,
                       plan.booster, m.devices);
  if (!plan.boosters.device_name.empty() && m.device_name != plan.boosters.device_name)
    return fmt::format("the plan's boosters are '{}', this machine's GPU is '{}'", plan.boosters.device_name, m.device_name);
  return "";
}

}  // namespace

std::string unbuilt_arrangement(const Plan& plan) {
  if (plan.boosters.arrangement != kSplit || plan.booster == "host") return "";
  return fmt::format("this plan is the split arrangement over {} {} boosters (one engine spanning them, each holding its "
                     "share of the experts); the split engine exists for host boosters only, the {} one (NCCL all-to-all) "
                     "is not built yet: build with --arrangement replicated (or without --boosters) to launch this fuel",
                     plan.boosters.count, plan.booster, plan.booster);
}

std::string launch_mismatch(const Plan& plan, const Topology& m) {
  if (plan.boosters.arrangement == kSplit) {
    if (const std::string d = device_mismatch(plan, m, plan.boosters.count, "the split engine"); !d.empty()) return d;
    if (plan.booster != "host" && m.devices != plan.boosters.count)
      return fmt::format("the split plan spans {} GPUs, this machine shows {} (set CUDA_VISIBLE_DEVICES to {} of them)",
                         plan.boosters.count, m.devices, plan.boosters.count);
    return "";
  }
  return device_mismatch(plan, m, 1, "a replica");
}

std::string front_mismatch(const Plan& plan, int replicas, const Topology* m) {
  if (plan.boosters.arrangement == kSplit)
    return fmt::format("the plan is the split arrangement over {} boosters (one engine spanning them), not replicas for "
                       "a front: launch it with `rocket launch`", plan.boosters.count);
  if (plan.boosters.count > 1 && replicas != plan.boosters.count)
    return fmt::format("the plan is a rocket of {} replicated boosters; fronting {} replica{} of it is another rocket "
                       "(rebuild with --boosters {})", plan.boosters.count, replicas, replicas == 1 ? "" : "s", replicas);
  if (!m) return "";
  return device_mismatch(plan, *m, replicas, fmt::format("{} replica{}", replicas, replicas == 1 ? "" : "s").c_str());
}

}  // namespace rocket
