#include "front/route.h"

namespace rocket {

std::optional<size_t> choose_replica(std::span<const ReplicaReport> replicas, size_t rotate) {
  const size_t n = replicas.size();
  std::optional<size_t> best;
  // Visiting in rotation order and keeping only strict improvements gives ties to the first visited.
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (rotate + k) % n;
    const ReplicaReport& r = replicas[i];
    if (!r.healthy) continue;
    if (!best) {
      best = i;
      continue;
    }
    const ReplicaReport& b = replicas[*best];
    if (r.cached_tokens > b.cached_tokens || (r.cached_tokens == b.cached_tokens && r.load < b.load)) best = i;
  }
  return best;
}

}  // namespace rocket
