// The replicated front's routing choice: given what every replica reported for one request, which
// replica runs it. A pure function of the reports, so the rule is tested on its own (route_test.cc).
//
// Rule: among the replicas in rotation, the one whose prefix cache holds the longest prefix of the
// prompt (PrefixReport::cached_tokens); where none holds any, or several hold the same longest one,
// the one the request's routing key last went to (an agent's session: its next turn finds its
// prefix there even while the last turn is still running), else the least loaded of those; a tie
// on load goes to the first at or after `rotate` (the front turns it per request), so equal replicas
// take turns instead of the first taking every request.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rocket {

struct ReplicaReport {
  bool healthy = false;        // in rotation (its health probe answers ok)
  int64_t cached_tokens = 0;   // 0 also when the replica could not report for this request
  int64_t load = 0;            // running + waiting requests, as the front best knows them
  bool keyed = false;          // the request's routing key last went to this replica
};

// The index of the chosen replica; nullopt when none is healthy.
std::optional<size_t> choose_replica(std::span<const ReplicaReport> replicas, size_t rotate = 0);

// The routing key of a request body for `path` ("/v1/responses", ...): its prompt_cache_key (chat
// completions, Responses: Codex sends its conversation's id), or for /v1/messages its
// metadata.user_id (Claude Code's holds the session); "" when it has none or is not JSON (the
// replica answers that).
std::string routing_key(std::string_view path, std::string_view body);

}  // namespace rocket
