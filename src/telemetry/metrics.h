// The Prometheus series of one engine (GET /metrics, text exposition format 0.0.4), held in a
// prometheus-cpp registry. Every family has a closed set of label values fixed here: request ids,
// prompt hashes and expert ids never become labels (docs/doctrine.md, telemetry), so the series count is the
// same after any number of requests. Per-request detail goes to spans (telemetry/otlp_exporter.h).
//
// Thread safety: every method may be called from any thread (prometheus-cpp's metrics are atomic or
// locked; the registry is built once, in the constructor).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "boosters/memory_budget.h"
#include "openai/openai_response.h"
#include "telemetry/step_split.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace rocket {

// Why a request was refused before it ran (rocket_requests_refused_total{reason}).
enum class Refusal { kQueueFull, kTooLong, kBadRequest, kKvCacheFull };
inline constexpr int kRefusals = 4;

// The reason an HTTP error answer counts under: 503 busy is the queue, a context_length_exceeded 400
// is too long, and every other client error a bad request. nullopt: not a refusal (a 5xx failure).
std::optional<Refusal> refusal_of(int status, std::string_view code);

// What the scheduler's load looks like at a scrape (EngineLoop::stats()).
struct Load {
  int64_t running = 0, waiting = 0;
  int64_t kv_pages_used = 0, kv_pages_total = 0;
  int64_t snapshots_used = 0, snapshots_total = 0;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Set once, at launch.
  void set_info(std::string_view fingerprint, std::string_view booster, std::string_view chemistry);
  // The budget upright measured (boosters/memory_budget.h) and the plan's residency against it.
  void set_memory(const MemoryBudget& budget, uint64_t residency);

  void refused(Refusal reason);
  // Admission: time waited in the queue, the prompt and the part of it the prefix cache served.
  void admitted(double queue_seconds, int64_t prompt_tokens, int64_t cached_tokens);
  // A cached recurrent state restored into a stream slot.
  void prefix_restored(double seconds);
  void first_token(double ttft_seconds);
  void next_token(double itl_seconds);
  // A request that ended with an answer: stop or length (tool calls are the server's reading of a stop).
  void succeeded(FinishReason reason, double e2e_seconds);
  // A sampled decode step: its split by kernel group, and a split engine's exchange on each link.
  void step(const StepSplit& split);
  void set_bytes_read_per_token(double bytes);
  void span_dropped();
  // A speculative step (docs/speculative.md): the tokens drafted and the drafts accepted.
  void verify_step(int drafted, int accepted);

  // The text exposition of every series, with `load` as the load gauges.
  std::string scrape(const Load& load);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  // NOTE: the plan's page and snapshot counts are `_capacity`, not `_total`: Prometheus reserves that
  // suffix for counters (promtool check metrics refuses a gauge named so).
  prometheus::Gauge *running_, *waiting_, *kv_used_, *kv_total_, *snap_used_, *snap_total_, *bytes_per_token_;
  prometheus::Gauge *free_, *reserve_, *floor_, *residency_, *usable_;
  prometheus::Counter *success_stop_, *success_length_, *refused_[kRefusals];
  prometheus::Counter *prompt_tokens_, *generation_tokens_, *cache_queried_, *cache_hit_, *spans_dropped_;
  prometheus::Counter *verify_steps_, *draft_tokens_, *accepted_tokens_;
  prometheus::Histogram *ttft_, *itl_, *e2e_, *queue_, *restore_, *step_[kStepGroups];
  prometheus::Family<prometheus::Gauge>* info_;
  // Split engines: the last sampled step's bytes and rate on each link, added as links first carry
  // bytes (by the one thread that reports steps); the exchanged bytes of every sampled step.
  prometheus::Family<prometheus::Gauge>*link_bytes_family_, *link_rate_family_;
  std::array<prometheus::Gauge*, kMaxSplitBoosters * kMaxSplitBoosters> link_bytes_{}, link_rate_{};
  prometheus::Histogram* exchange_bytes_;
};

}  // namespace rocket
