// The replicated front's routing choice: given what every replica reported for one request, which
// replica runs it. A pure function of the reports, so the rule is tested on its own (route_test.cc).
//
// Rule: among the replicas in rotation, the one whose prefix cache holds the longest prefix of the
// prompt (PrefixReport::cached_tokens); where none holds any, or several hold the same longest one,
// the least loaded of those; a tie on load goes to the first at or after `rotate` (the front turns
// it per request), so equal replicas take turns instead of the first taking every request.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace rocket {

struct ReplicaReport {
  bool healthy = false;        // in rotation (its health probe answers ok)
  int64_t cached_tokens = 0;   // 0 also when the replica could not report for this request
  int64_t load = 0;            // running + waiting requests, as the front best knows them
};

// The index of the chosen replica; nullopt when none is healthy.
std::optional<size_t> choose_replica(std::span<const ReplicaReport> replicas, size_t rotate = 0);

}  // namespace rocket
