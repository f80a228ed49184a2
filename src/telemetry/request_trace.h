// One request's timeline and GenAI attributes, filled in by the scheduler as the request moves
// (arrival, admission, first token, end) and turned into its spans at the end (telemetry/otlp_json.h)
// and into the latency histograms as it goes (telemetry/telemetry.h). Plain data, owned by the loop
// thread once submitted.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "telemetry/trace_context.h"

namespace rocket {

struct RequestTrace {
  using Clock = std::chrono::steady_clock;

  std::string operation;               // "chat.completions" | "completions": the span's name
  std::optional<TraceContext> parent;  // the client's traceparent, when it sent a valid one
  // gen_ai.request.*
  std::string model;
  std::optional<int64_t> max_tokens;
  double temperature = 1.0;
  // What the client sent that changes no token (CompletionRequest::client_attributes): the root
  // span's rocket.client.* attributes.
  std::vector<std::pair<std::string, std::string>> client;

  // Steady times for durations; `arrived_wall` maps them onto the wall clock spans carry.
  std::chrono::system_clock::time_point arrived_wall;
  Clock::time_point arrived, admitted, first_token, last_token, ended;
  bool was_admitted = false;
  int64_t tokens = 0;  // generated so far (the engine's picks, an eos included)

  // Admission: prompt length, what the prefix cache served, and whether a state snapshot was restored.
  int64_t prompt_tokens = 0, cached_tokens = 0;
  bool restored_snapshot = false;
  double restore_seconds = 0;

  // The end: usage's completion tokens and the finish reason ("stop" | "length"), or the failure
  // ("cancelled" when the client left, else the engine's error).
  int64_t output_tokens = 0;
  std::string finish_reason;
  std::string error;

  // Unix nanoseconds of a steady time point of this request.
  uint64_t unix_nanos(Clock::time_point t) const {
    const auto wall = arrived_wall + std::chrono::duration_cast<std::chrono::system_clock::duration>(t - arrived);
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(wall.time_since_epoch()).count());
  }
};

}  // namespace rocket
