#include "telemetry/metrics.h"

// prometheus-cpp (Debian: prometheus-cpp-dev): the registry, the metric types and the text serializer
// of the official C++ client, rather than an exposition writer of our own. Only its core library:
// the server is cpp-httplib's, so its pull (civetweb) half is not needed.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace rocket {

namespace {

using prometheus::Histogram;

// Bucket bounds, in seconds, per quantity: TTFT and end-to-end latency span a cached short prompt to a
// long queued one; inter-token latency a fast decode step to a stalled one; a restore is a copy of a
// few MiB; a step's kernel group is microseconds (host: milliseconds) at the tiny fuel, tens of ms on a3b.
const Histogram::BucketBoundaries kTtft = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                           1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640};
const Histogram::BucketBoundaries kItl = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
                                          0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 10};
const Histogram::BucketBoundaries kE2e = {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30,
                                          40, 50, 60, 120, 240, 480, 960, 1920};
const Histogram::BucketBoundaries kQueue = {0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
const Histogram::BucketBoundaries kRestore = {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1};
const Histogram::BucketBoundaries kStep = {1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1, 3};
// Bytes a split step exchanges: a tiny host fuel's few KiB to an a3b prefill chunk's hundreds of MiB.
const Histogram::BucketBoundaries kExchangeBytes = {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20,
                                                    1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30, 4.0 * (1 << 30)};

constexpr std::string_view kRefusalNames[kRefusals] = {"queue_full", "too_long", "bad_request", "kv_cache_full"};

}  // namespace

std::optional<Refusal> refusal_of(int status, std::string_view code) {
  if (status == 503 && code == "server_busy") return Refusal::kQueueFull;
  if (status == 400 && code == "context_length_exceeded") return Refusal::kTooLong;
  if (status >= 400 && status < 500) return Refusal::kBadRequest;
  return std::nullopt;
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  auto gauge = [&](const char* name, const char* help) -> prometheus::Gauge* {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
  };
  auto counter = [&](const char* name, const char* help) -> prometheus::Counter* {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  auto histogram = [&](const char* name, const char* help, const Histogram::BucketBoundaries& b) -> Histogram* {
    return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, b);
  };
  running_ = gauge("rocket_requests_running", "Requests holding a stream slot (prefilling or decoding).");
  waiting_ = gauge("rocket_requests_waiting", "Requests queued for a stream slot.");
  kv_used_ = gauge("rocket_kv_pages_used", "KV cache pages not free (held by streams or kept by the prefix cache).");
  kv_total_ = gauge("rocket_kv_pages_capacity", "KV cache pages of the plan.");
  snap_used_ = gauge("rocket_state_snapshots_used", "Recurrent-state snapshot slots not free.");
  snap_total_ = gauge("rocket_state_snapshots_capacity", "Recurrent-state snapshot slots of the plan.");
  bytes_per_token_ = gauge("rocket_bytes_read_per_token",
                           "Bytes a decode step reads per generated token at the current batch (the plan's byte model).");
  free_ = gauge("rocket_device_free_bytes", "Memory free when the engine started (device: after context creation).");
  reserve_ = gauge("rocket_memory_reserve_bytes", "Memory the engine holds outside its arena plus the operator's --reserve.");
  floor_ = gauge("rocket_memory_floor_bytes", "Headroom never handed to the arena.");
  residency_ = gauge("rocket_plan_residency_bytes", "The plan's arena (weights and runtime buffers).");
  usable_ = gauge("rocket_memory_usable_bytes", "free - reserve - floor: what the plan's residency must fit in.");

  auto& success = prometheus::BuildCounter()
                      .Name("rocket_request_success_total")
                      .Help("Requests answered to the end, by the engine's finish reason.")
                      .Register(r);
  success_stop_ = &success.Add({{"finish_reason", "stop"}});
  success_length_ = &success.Add({{"finish_reason", "length"}});
  auto& refused = prometheus::BuildCounter()
                      .Name("rocket_requests_refused_total")
                      .Help("Requests refused before they ran, by reason.")
                      .Register(r);
  for (int i = 0; i < kRefusals; ++i) refused_[i] = &refused.Add({{"reason", std::string(kRefusalNames[i])}});
  prompt_tokens_ = counter("rocket_prompt_tokens_total", "Prompt tokens of admitted requests.");
  generation_tokens_ = counter("rocket_generation_tokens_total", "Tokens generated.");
  cache_queried_ = counter("rocket_prefix_cache_queried_tokens_total", "Prompt tokens looked up in the prefix cache.");
  cache_hit_ = counter("rocket_prefix_cache_hit_tokens_total", "Prompt tokens the prefix cache served.");
  spans_dropped_ = counter("rocket_trace_spans_dropped_total", "Request spans dropped because the export queue was full.");
  verify_steps_ = counter("rocket_spec_verify_steps_total", "Speculative steps: one draft verified in one engine call.");
  draft_tokens_ = counter("rocket_spec_draft_tokens_total", "Tokens the MTP layer drafted.");
  accepted_tokens_ = counter("rocket_spec_accepted_tokens_total",
                             "Drafted tokens accepted (the acceptance is accepted / draft tokens).");

  ttft_ = histogram("rocket_time_to_first_token_seconds", "Arrival to the first generated token.", kTtft);
  itl_ = histogram("rocket_inter_token_latency_seconds", "Between consecutive tokens of a request.", kItl);
  e2e_ = histogram("rocket_e2e_request_latency_seconds", "Arrival to the last token of an answered request.", kE2e);
  queue_ = histogram("rocket_queue_time_seconds", "Arrival to admission into a stream slot.", kQueue);
  restore_ = histogram("rocket_prefix_restore_seconds", "Restoring a cached recurrent state into a stream slot.", kRestore);
  auto& step = prometheus::BuildHistogram()
                   .Name("rocket_step_seconds")
                   .Help("Time of one sampled decode step in each kernel group, measured on the running engine.")
                   .Register(r);
  for (int k = 0; k < kStepGroups; ++k) step_[k] = &step.Add({{"kind", std::string(kStepGroupNames[size_t(k)])}}, kStep);
  link_bytes_family_ = &prometheus::BuildGauge()
                            .Name("rocket_exchange_link_step_bytes")
                            .Help("Split boosters: bytes the last sampled decode step sent over the link from one "
                                  "booster to another (routed rows out and results back, every MoE layer).")
                            .Register(r);
  link_rate_family_ = &prometheus::BuildGauge()
                           .Name("rocket_exchange_link_bytes_per_second")
                           .Help("Split boosters: the link's bytes in the last sampled step over that step's "
                                 "all_to_all time: what the link carried while the boosters exchanged.")
                           .Register(r);
  exchange_bytes_ = histogram("rocket_exchange_bytes_per_step",
                              "Split boosters: bytes one sampled decode step exchanged between boosters, all links.",
                              kExchangeBytes);
  info_ = &prometheus::BuildGauge()
               .Name("rocket_info")
               .Help("The engine's identity as labels; value 1.")
               .Register(r);
}

Metrics::~Metrics() = default;

void Metrics::set_info(std::string_view fingerprint, std::string_view booster, std::string_view chemistry) {
  info_->Add({{"fingerprint", std::string(fingerprint)}, {"booster", std::string(booster)},
              {"chemistry", std::string(chemistry)}})
      .Set(1);
}

void Metrics::set_memory(const MemoryBudget& b, uint64_t residency) {
  free_->Set(double(b.free));
  reserve_->Set(double(b.reserve));
  floor_->Set(double(b.floor));
  usable_->Set(double(b.usable()));
  residency_->Set(double(residency));
}

void Metrics::refused(Refusal reason) { refused_[int(reason)]->Increment(); }

void Metrics::admitted(double queue_seconds, int64_t prompt_tokens, int64_t cached_tokens) {
  queue_->Observe(queue_seconds);
  prompt_tokens_->Increment(double(prompt_tokens));
  cache_queried_->Increment(double(prompt_tokens));
  cache_hit_->Increment(double(cached_tokens));
}

void Metrics::prefix_restored(double seconds) { restore_->Observe(seconds); }

void Metrics::first_token(double ttft_seconds) {
  ttft_->Observe(ttft_seconds);
  generation_tokens_->Increment();
}

void Metrics::next_token(double itl_seconds) {
  itl_->Observe(itl_seconds);
  generation_tokens_->Increment();
}

void Metrics::verify_step(int drafted, int accepted) {
  verify_steps_->Increment();
  draft_tokens_->Increment(double(drafted));
  accepted_tokens_->Increment(double(accepted));
}

void Metrics::succeeded(FinishReason reason, double e2e_seconds) {
  (reason == FinishReason::kLength ? success_length_ : success_stop_)->Increment();
  e2e_->Observe(e2e_seconds);
}

void Metrics::step(const StepSplit& split) {
  // An engine that exchanges nothing has no all_to_all time to report (its series stays empty).
  for (int k = 0; k < kStepGroups; ++k)
    if (StepGroup(k) != StepGroup::kAllToAll || split.boosters > 0) step_[k]->Observe(split.seconds[size_t(k)]);
  if (split.boosters == 0) return;
  const double seconds = split[StepGroup::kAllToAll];
  uint64_t total = 0;
  for (int from = 0; from < split.boosters; ++from)
    for (int to = 0; to < split.boosters; ++to) {
      if (from == to) continue;
      const uint64_t bytes = split.link(from, to);
      total += bytes;
      const size_t i = size_t(from * kMaxSplitBoosters + to);
      if (!link_bytes_[i]) {
        const prometheus::Labels link = {{"from", std::to_string(from)}, {"to", std::to_string(to)}};
        link_bytes_[i] = &link_bytes_family_->Add(link);
        link_rate_[i] = &link_rate_family_->Add(link);
      }
      link_bytes_[i]->Set(double(bytes));
      link_rate_[i]->Set(seconds > 0 ? double(bytes) / seconds : 0);
    }
  exchange_bytes_->Observe(double(total));
}

void Metrics::set_bytes_read_per_token(double bytes) { bytes_per_token_->Set(bytes); }

void Metrics::span_dropped() { spans_dropped_->Increment(); }

std::string Metrics::scrape(const Load& load) {
  running_->Set(double(load.running));
  waiting_->Set(double(load.waiting));
  kv_used_->Set(double(load.kv_pages_used));
  kv_total_->Set(double(load.kv_pages_total));
  snap_used_->Set(double(load.snapshots_used));
  snap_total_->Set(double(load.snapshots_total));
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace rocket
