#include "front/route.h"

#include <nlohmann/json.hpp>

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
    const bool better = r.cached_tokens != b.cached_tokens ? r.cached_tokens > b.cached_tokens
                        : r.keyed != b.keyed               ? r.keyed
                                                           : r.load < b.load;
    if (better) best = i;
  }
  return best;
}

std::string routing_key(std::string_view path, std::string_view body) {
  // Only the top two levels matter: deeper containers are skipped, so a hostile body costs no depth.
  const auto shallow = [](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    const bool opens = event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start;
    return !(opens && depth > 2);
  };
  const nlohmann::json j = nlohmann::json::parse(body, shallow, /*allow_exceptions=*/false);
  if (!j.is_object()) return "";
  const nlohmann::json* key = nullptr;
  if (path == "/v1/messages") {
    if (const auto m = j.find("metadata"); m != j.end() && m->is_object())
      if (const auto u = m->find("user_id"); u != m->end()) key = &*u;
  } else if (const auto k = j.find("prompt_cache_key"); k != j.end()) {
    key = &*k;
  }
  return key && key->is_string() ? key->get<std::string>() : "";
}

}  // namespace rocket
