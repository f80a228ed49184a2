// Exports finished requests' spans over OTLP/HTTP with the JSON encoding (POST URL/v1/traces,
// Content-Type application/json), `rocket-engine launch --otlp-traces-endpoint URL`.
//
// The engine loop only push()es into a bounded queue and never waits: when the queue is full, or an
// export fails, the spans are dropped and counted (rocket_trace_spans_dropped_total). One thread of
// the exporter's own encodes and posts batches: at most kMaxBatch requests, at least every kFlush.
//
// Thread safety: push() from any thread; destruction flushes what is queued, then joins.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "telemetry/request_trace.h"

namespace rocket {

class OtlpExporter {
 public:
  static constexpr size_t kQueueCapacity = 4096;  // requests
  static constexpr size_t kMaxBatch = 256;
  static constexpr std::chrono::milliseconds kFlush{500};

  // `endpoint`: "http://host:port" or with a path prefix ("http://host:port/otel"); Error when it is
  // not an http(s) URL. `dropped(n)` is called, from any thread, for every n spans lost.
  OtlpExporter(const std::string& endpoint, std::function<void(size_t)> dropped);
  ~OtlpExporter();
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  void push(RequestTrace trace);

 private:
  void run();

  std::string origin_, path_;  // "http://host:port", "/prefix/v1/traces"
  std::function<void(size_t)> dropped_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestTrace> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace rocket
