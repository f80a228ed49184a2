#include "telemetry/telemetry.h"

#include "plan/step_bytes.h"

namespace rocket {

namespace {

double seconds(RequestTrace::Clock::time_point from, RequestTrace::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

Telemetry::Telemetry(const TelemetryOptions& o) : step_sample_(o.step_sample) {
  if (!o.otlp_traces_endpoint.empty())
    exporter_ = std::make_unique<OtlpExporter>(o.otlp_traces_endpoint, [this](size_t n) {
      for (size_t i = 0; i < n; ++i) metrics_.span_dropped();
    });
}

void Telemetry::set_plan(const Plan& plan) {
  metrics_.set_info(plan.fingerprint, plan.booster, plan.chemistry.architecture);
  // KV traffic is linear in the context (plan/step_bytes.h): two evaluations per bucket give the model,
  // so a step never walks the plan's tensors.
  bytes_.clear();
  for (int b : plan.buckets) {
    const StepBytes at0 = step_bytes(plan, b, 0), at1 = step_bytes(plan, b, 1);
    bytes_.push_back({b, at0.total(), at1.total() - at0.total()});
  }
}

RequestTrace Telemetry::begin(const CompletionRequest& r, std::optional<TraceContext> parent) {
  RequestTrace t;
  t.operation = r.kind == CompletionRequest::Kind::kChat ? "chat.completions" : "completions";
  t.parent = parent;
  t.model = r.model;
  t.max_tokens = r.max_tokens;
  t.temperature = r.temperature;
  t.client = r.client_attributes;
  t.arrived_wall = std::chrono::system_clock::now();
  t.arrived = RequestTrace::Clock::now();
  return t;
}

void Telemetry::admitted(RequestTrace& t, int64_t prompt_tokens, int64_t cached_tokens,
                         std::optional<double> restore_seconds) {
  t.admitted = RequestTrace::Clock::now();
  t.was_admitted = true;
  t.prompt_tokens = prompt_tokens;
  t.cached_tokens = cached_tokens;
  t.restored_snapshot = restore_seconds.has_value();
  t.restore_seconds = restore_seconds.value_or(0);
  metrics_.admitted(seconds(t.arrived, t.admitted), prompt_tokens, cached_tokens);
  if (restore_seconds) metrics_.prefix_restored(*restore_seconds);
}

void Telemetry::token(RequestTrace& t) {
  const auto now = RequestTrace::Clock::now();
  if (t.tokens++ == 0) {
    t.first_token = now;
    metrics_.first_token(seconds(t.arrived, now));
  } else {
    metrics_.next_token(seconds(t.last_token, now));
  }
  t.last_token = now;
}

void Telemetry::ended(RequestTrace&& t) {
  t.ended = RequestTrace::Clock::now();
  if (t.finish_reason == "stop") metrics_.succeeded(FinishReason::kStop, seconds(t.arrived, t.ended));
  else if (t.finish_reason == "length") metrics_.succeeded(FinishReason::kLength, seconds(t.arrived, t.ended));
  if (exporter_) exporter_->push(std::move(t));
}

void Telemetry::decode_step(int rows, double context) {
  for (const BucketBytes& b : bytes_)
    if (b.bucket >= rows) {
      metrics_.set_bytes_read_per_token((b.base + b.per_context * context) / rows);
      return;
    }
}

}  // namespace rocket
