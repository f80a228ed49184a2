// What the scheduler and the server report to: the Prometheus series (telemetry/metrics.h) and, with
// an OTLP endpoint, the request spans (telemetry/otlp_exporter.h). The scheduler moves each request's
// RequestTrace through admitted() → token()… → ended() on its loop thread; the latency histograms are
// observed as it goes and the spans are exported at the end.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "openai/openai_request.h"
#include "plan/plan.h"
#include "telemetry/metrics.h"
#include "telemetry/otlp_exporter.h"
#include "telemetry/request_trace.h"

namespace rocket {

struct TelemetryOptions {
  std::string otlp_traces_endpoint;  // empty: no traces
  int step_sample = 64;              // measure one decode step in this many (0: none)
};

class Telemetry {
 public:
  explicit Telemetry(const TelemetryOptions& options);
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  Metrics& metrics() { return metrics_; }
  int step_sample() const { return step_sample_; }

  // The plan the engine runs: rocket_info, and the byte model behind rocket_bytes_read_per_token.
  void set_plan(const Plan& plan);

  // A request arrives (HTTP thread): its trace starts now. `parent`: the client's traceparent.
  static RequestTrace begin(const CompletionRequest& r, std::optional<TraceContext> parent);
  // Loop thread, in this order.
  void admitted(RequestTrace& t, int64_t prompt_tokens, int64_t cached_tokens, std::optional<double> restore_seconds);
  void token(RequestTrace& t);
  // The end: t.output_tokens and t.finish_reason (answered) or t.error filled in by the caller.
  void ended(RequestTrace&& t);
  // A decode step of `rows` streams at a mean context of `context` tokens.
  void decode_step(int rows, double context);
  // A speculative step of one stream: `drafted` tokens proposed, `accepted` of them kept.
  void verify_step(int drafted, int accepted) { metrics_.verify_step(drafted, accepted); }

 private:
  Metrics metrics_;
  std::unique_ptr<OtlpExporter> exporter_;
  int step_sample_;
  // The plan's byte model per bucket: bytes at context 0, and per token of context.
  struct BucketBytes {
    int bucket;
    double base, per_context;
  };
  std::vector<BucketBytes> bytes_;
};

}  // namespace rocket
