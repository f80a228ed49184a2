#include "compiler/placement.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"

namespace rocket {

std::vector<int> coactivation_order(const CoactivationProfile& p, int layer) {
  const int E = p.experts();
  std::vector<bool> placed(size_t(E), false);
  std::vector<int> order;
  order.reserve(size_t(E));
  // Is a a better next unit than b after `last` (-1: the first unit)?
  auto better = [&](int a, int b, int last) {
    if (last >= 0) {
      const uint64_t ca = p.coactivation(layer, last, a), cb = p.coactivation(layer, last, b);
      if (ca != cb) return ca > cb;
    }
    const uint64_t fa = p.frequency(layer, a), fb = p.frequency(layer, b);
    if (fa != fb) return fa > fb;
    return a < b;
  };
  for (int u = 0; u < E; ++u) {
    const int last = order.empty() ? -1 : order.back();
    int best = -1;
    for (int e = 0; e < E; ++e)
      if (!placed[size_t(e)] && (best < 0 || better(e, best, last))) best = e;
    placed[size_t(best)] = true;
    order.push_back(best);
  }
  return order;
}

std::vector<std::vector<int>> place_experts(const CoactivationProfile* p, int layer, int E, int N) {
  CHECK(N >= 1 && E % N == 0, "boosters must divide the experts");
  const int capacity = E / N;
  std::vector<std::vector<int>> on(static_cast<size_t>(N));
  if (!p) {
    for (int e = 0; e < E; ++e) on[size_t(e / capacity)].push_back(e);
    return on;
  }
  CHECK(p->experts() == E, "a profile of this fuel's expert count");
  std::vector<int> by_frequency(static_cast<size_t>(E));
  std::iota(by_frequency.begin(), by_frequency.end(), 0);
  std::stable_sort(by_frequency.begin(), by_frequency.end(),
                   [&](int a, int b) { return p->frequency(layer, a) > p->frequency(layer, b); });
  uint64_t total = 0;
  for (int e = 0; e < E; ++e) total += p->frequency(layer, e);
  const double bound = (1.0 + kLoadSlack) * double(total) / N;
  std::vector<uint64_t> load(size_t(N), 0);
  for (int e : by_frequency) {
    const uint64_t f = p->frequency(layer, e);
    int best = -1;
    uint64_t best_affinity = 0;
    for (int b = 0; b < N; ++b) {
      if (int(on[size_t(b)].size()) == capacity || double(load[size_t(b)] + f) > bound) continue;
      uint64_t affinity = 0;
      for (int x : on[size_t(b)]) affinity += p->coactivation(layer, e, x);
      if (best < 0 || affinity > best_affinity || (affinity == best_affinity && load[size_t(b)] < load[size_t(best)]))
        best = b, best_affinity = affinity;
    }
    if (best < 0)  // every booster with room would pass the bound: the least loaded takes it
      for (int b = 0; b < N; ++b)
        if (int(on[size_t(b)].size()) < capacity && (best < 0 || load[size_t(b)] < load[size_t(best)])) best = b;
    on[size_t(best)].push_back(e);
    load[size_t(best)] += f;
  }
  // Within each booster, the one-booster order restricted to its experts.
  const std::vector<int> order = coactivation_order(*p, layer);
  std::vector<int> unit_of = units_of_order(order);
  for (auto& experts : on)
    std::sort(experts.begin(), experts.end(), [&](int a, int b) { return unit_of[size_t(a)] < unit_of[size_t(b)]; });
  return on;
}

std::vector<int> units_of_order(const std::vector<int>& order) {
  std::vector<int> units(order.size(), -1);
  for (size_t u = 0; u < order.size(); ++u) {
    CHECK(order[u] >= 0 && size_t(order[u]) < order.size() && units[size_t(order[u])] < 0, "an order is a permutation");
    units[size_t(order[u])] = int(u);
  }
  return units;
}

void plan_split(Plan& plan) {
  PlanBoosters& b = plan.boosters;
  const Chemistry& c = plan.chemistry;
  auto unit_offset = [&](int unit) {
    for (int e = 0; e < c.experts; ++e)
      if (plan.expert_unit(0, e) == unit) return plan.tensor(fmt::format("layers.0.mlp.experts.{}.gate_proj.weight", e)).offset;
    CHECK(false, "a validated expert order is a permutation");
    return uint64_t(0);
  };
  const uint64_t stride = unit_offset(1) - unit_offset(0);
  const uint64_t elsewhere = uint64_t(c.experts - c.experts / b.count) * stride * uint64_t(c.layers);
  b.residency = plan.arena_bytes - elsewhere;
  b.exchange = PlanExchange{.moe_layers = c.layers,
                            .decode_rows = int64_t(plan.max_streams) * c.top_k,
                            .prefill_rows = int64_t(plan.prefill_chunk) * c.top_k,
                            .row_bytes = uint64_t(c.hidden) * uint64_t(plan.activation_bytes)};
}

}  // namespace rocket
