#include "telemetry/otlp_exporter.h"

#include <httplib.h>

#include <cstdio>
#include <random>

#include "core/error.h"
#include "telemetry/otlp_json.h"

namespace rocket {

namespace {

// Spans a request makes when it has been admitted and decoded: the request, queue, prefill, decode.
constexpr size_t kSpansPerRequest = 4;

}  // namespace

OtlpExporter::OtlpExporter(const std::string& endpoint, std::function<void(size_t)> dropped)
    : dropped_(std::move(dropped)) {
  const size_t scheme = endpoint.find("://");
  const std::string s = scheme == std::string::npos ? "" : endpoint.substr(0, scheme);
  if (s != "http" && s != "https")
    fail("--otlp-traces-endpoint: '{}' is not an http:// or https:// URL (OTLP/HTTP, e.g. http://127.0.0.1:4318)", endpoint);
  const size_t slash = endpoint.find('/', scheme + 3);
  origin_ = endpoint.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : endpoint.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (origin_.size() <= scheme + 3) fail("--otlp-traces-endpoint: '{}' names no host", endpoint);
  path_ = prefix + "/v1/traces";
  thread_ = std::thread([this] { run(); });
}

OtlpExporter::~OtlpExporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OtlpExporter::push(RequestTrace trace) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() < kQueueCapacity) {
      queue_.push_back(std::move(trace));
      if (queue_.size() >= kMaxBatch) cv_.notify_one();
      return;
    }
  }
  dropped_(kSpansPerRequest);
}

void OtlpExporter::run() {
  httplib::Client client(origin_);
  client.set_connection_timeout(std::chrono::seconds(2));
  client.set_read_timeout(std::chrono::seconds(5));
  client.set_write_timeout(std::chrono::seconds(5));
  std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32)};
  bool failing = false;  // log the first failure of a streak only
  for (;;) {
    std::deque<RequestTrace> batch;
    bool last;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, kFlush, [&] { return stopping_ || queue_.size() >= kMaxBatch; });
      last = stopping_;
      while (!queue_.empty() && batch.size() < kMaxBatch) batch.push_back(std::move(queue_.front())), queue_.pop_front();
    }
    if (!batch.empty()) {
      std::vector<nlohmann::ordered_json> spans;
      for (const RequestTrace& t : batch)
        for (auto& s : otlp_spans(t, rng)) spans.push_back(std::move(s));
      const size_t n = spans.size();
      const std::string body =
          otlp_export_request(std::move(spans)).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      httplib::Result res = client.Post(path_, body, "application/json");
      const bool ok = res && res->status >= 200 && res->status < 300;
      if (!ok) {
        dropped_(n);
        if (!failing)
          std::fprintf(stderr, "[telemetry] OTLP export to %s%s failed (%s); dropping spans until it succeeds\n",
                       origin_.c_str(), path_.c_str(),
                       res ? ("HTTP " + std::to_string(res->status)).c_str() : httplib::to_string(res.error()).c_str());
      }
      failing = !ok;
    }
    if (last) {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return;
    }
  }
}

}  // namespace rocket
