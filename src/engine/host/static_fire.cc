#include "engine/host/static_fire.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "kernels/host/sample.h"

namespace rocket {

std::string static_fire(HostEngine& e) {
  const Plan& plan = e.plan();
  std::vector<int32_t> ids(size_t(plan.max_streams));
  std::vector<int> slots(size_t(plan.max_streams));
  std::vector<int64_t> pos(size_t(plan.max_streams), 0);
  for (int i = 0; i < plan.max_streams; ++i) ids[size_t(i)] = int32_t((i * 7919) % engine::kVocab), slots[size_t(i)] = i;
  for (int b : plan.buckets) {
    for (int i = 0; i < b; ++i) e.reset_slot(i);
    e.decode(b, ids.data(), slots.data(), pos.data());
    for (int i = 0; i < b; ++i)
      for (int v = 0; v < engine::kVocab; v += 997)
        if (!std::isfinite(e.logits(i)[v])) fail("bucket {} row {} produced a non-finite logit", b, i);
  }
  std::string summary = fmt::format("{} buckets warm", plan.buckets.size());
  const StaticFire& sf = plan.static_fire;
  if (sf.prompt.empty()) return summary + "; no golden token in the plan (build with --golden to check one)";
  e.reset_slot(0);
  const int32_t got = host::argmax(e.prefill_prompt(0, sf.prompt), int(engine::kVocab));
  e.reset_slot(0);
  if (got != sf.token)
    fail("the golden prompt gave token {}, the reference's greedy token is {} (reference margin {:.3f}; {})", got,
         sf.token, sf.margin, sf.source);
  return summary + fmt::format("; golden token {} after {} prompt tokens matches the reference", got,
                               sf.prompt.size());
}

}  // namespace rocket
