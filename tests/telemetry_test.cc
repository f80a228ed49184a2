// Telemetry on the CPU: traceparent parsing (client input), the Prometheus registry's fixed series,
// refusal reasons, step sampling, and the OTLP/JSON spans of a request.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "telemetry/metrics.h"
#include "telemetry/otlp_exporter.h"
#include "telemetry/otlp_json.h"
#include "telemetry/step_split.h"
#include "telemetry/telemetry.h"
#include "telemetry/trace_context.h"

namespace rocket {
namespace {

constexpr const char* kHeader = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

TEST(Traceparent, ParsesTheSpecExample) {
  const std::optional<TraceContext> c = parse_traceparent(kHeader);
  ASSERT_TRUE(c);
  EXPECT_EQ(hex(c->trace_id), "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(hex(c->span_id), "b7ad6b7169203331");
  EXPECT_EQ(c->flags, 1);
}

TEST(Traceparent, RefusesWhatTheSpecRefuses) {
  const std::string good = kHeader;
  for (const std::string& bad : std::vector<std::string>{
           std::string(""), good.substr(0, 54), good + "-",               // short; version 00 is exactly 55
           "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",      // uppercase hex
           "00-00000000000000000000000000000000-b7ad6b7169203331-01",      // zero trace id
           "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",      // zero parent id
           "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",      // version ff
           "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",      // separator
           "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",      // flags not hex
           "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",     // a later version's extension needs "-"
       })
    EXPECT_FALSE(parse_traceparent(bad)) << bad;
  // A later version: its first 55 characters, whatever follows a "-".
  EXPECT_TRUE(parse_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more"));
}

TEST(Traceparent, RandomInputNeverYieldsForeignIds) {
  std::mt19937_64 rng(7);
  const std::string alphabet = "0123456789abcdef-Ff_x";
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string h = kHeader;
    // Mutate a few characters of a valid header, or draw a random one.
    if (i % 2) {
      for (int m = 0; m < 1 + int(rng() % 3); ++m) h[rng() % h.size()] = alphabet[rng() % alphabet.size()];
    } else {
      h.resize(rng() % 70);
      for (char& c : h) c = alphabet[rng() % alphabet.size()];
    }
    const std::optional<TraceContext> c = parse_traceparent(h);
    if (!c) continue;
    ++accepted;
    ASSERT_EQ(hex(c->trace_id), h.substr(3, 32)) << h;
    ASSERT_EQ(hex(c->span_id), h.substr(36, 16)) << h;
  }
  EXPECT_GT(accepted, 0);  // the mutations keep some headers valid (a hex digit for a hex digit)
}

TEST(Traceparent, RandomIdsAreNonzeroAndDistinct) {
  std::mt19937_64 rng(1);
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string t = hex(random_trace_id(rng)), s = hex(random_span_id(rng));
    EXPECT_EQ(t.size(), 32u);
    EXPECT_EQ(s.size(), 16u);
    EXPECT_NE(t, std::string(32, '0'));
    EXPECT_TRUE(seen.insert(t).second);
  }
}

TEST(Refusals, ReasonsFromTheErrorAnswer) {
  EXPECT_EQ(refusal_of(503, "server_busy"), Refusal::kQueueFull);
  EXPECT_EQ(refusal_of(400, "context_length_exceeded"), Refusal::kTooLong);
  EXPECT_EQ(refusal_of(400, ""), Refusal::kBadRequest);
  EXPECT_EQ(refusal_of(404, "model_not_found"), Refusal::kBadRequest);
  EXPECT_EQ(refusal_of(500, ""), std::nullopt);
  EXPECT_EQ(refusal_of(503, "not_launched"), std::nullopt);
}

TEST(StepSampling, TakesOneStepInN) {
  StepSampling every4(4), none(0);
  int taken = 0, taken_none = 0;
  for (int i = 0; i < 400; ++i) taken += every4.take(), taken_none += none.take();
  EXPECT_EQ(taken, 100);
  EXPECT_EQ(taken_none, 0);
}

// Series of an exposition: the sample lines (name and labels), without their values.
std::set<std::string> series(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') out.insert(line.substr(0, line.rfind(' ')));
  return out;
}

double value(const std::string& text, const std::string& sample) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  ADD_FAILURE() << "no sample " << sample;
  return -1;
}

TEST(Metrics, SeriesAreFixedWhateverTheRequests) {
  Metrics m;
  m.set_info("abc123", "host", "qwen3_5_moe");
  const std::set<std::string> before = series(m.scrape({}));
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    m.admitted(1e-4 * double(rng() % 1000), int64_t(rng() % 5000), int64_t(rng() % 100));
    m.first_token(1e-3 * double(rng() % 5000));
    for (int t = 0; t < 5; ++t) m.next_token(1e-4 * double(rng() % 1000));
    m.succeeded(i % 3 ? FinishReason::kStop : FinishReason::kLength, 0.01 * double(rng() % 1000));
    m.refused(Refusal(rng() % kRefusals));
    m.prefix_restored(1e-5 * double(rng() % 1000));
    StepSplit s{.rows = 1 << (rng() % 6)};
    for (double& x : s.seconds) x = 1e-5 * double(rng() % 1000);
    m.step(s);
    m.span_dropped();
  }
  const std::string text = m.scrape({.running = 3, .waiting = 1, .kv_pages_used = 9, .kv_pages_total = 64});
  EXPECT_EQ(series(text), before);
  EXPECT_EQ(value(text, "rocket_request_success_total{finish_reason=\"length\"}"), 667);
  EXPECT_EQ(value(text, "rocket_generation_tokens_total"), 2000 * 6);
  EXPECT_EQ(value(text, "rocket_requests_running"), 3);
  EXPECT_EQ(value(text, "rocket_step_seconds_count{kind=\"moe\"}"), 2000);
  EXPECT_EQ(value(text, "rocket_info{booster=\"host\",chemistry=\"qwen3_5_moe\",fingerprint=\"abc123\"}"), 1);
}

TEST(Metrics, SplitStepsReportTheirExchange) {
  Metrics m;
  StepSplit one{.rows = 4};  // one booster: no exchange, no all_to_all observation
  one[StepGroup::kMoe] = 0.002;
  m.step(one);
  std::string text = m.scrape({});
  EXPECT_EQ(value(text, "rocket_step_seconds_count{kind=\"all_to_all\"}"), 0);
  EXPECT_EQ(text.find("rocket_exchange_link_step_bytes{"), std::string::npos);

  StepSplit split{.rows = 4, .boosters = 2};
  split[StepGroup::kAllToAll] = 0.5;
  split.link(0, 1) = 3000;
  split.link(1, 0) = 1000;
  m.step(split);
  text = m.scrape({});
  EXPECT_EQ(value(text, "rocket_step_seconds_count{kind=\"all_to_all\"}"), 1);
  EXPECT_EQ(value(text, "rocket_exchange_link_step_bytes{from=\"0\",to=\"1\"}"), 3000);
  EXPECT_EQ(value(text, "rocket_exchange_link_step_bytes{from=\"1\",to=\"0\"}"), 1000);
  EXPECT_EQ(value(text, "rocket_exchange_link_bytes_per_second{from=\"0\",to=\"1\"}"), 6000);
  EXPECT_EQ(value(text, "rocket_exchange_bytes_per_step_sum"), 4000);
  EXPECT_EQ(text.find("from=\"0\",to=\"0\""), std::string::npos);  // a booster's own rows cross no link
}

TEST(Metrics, ExpositionNamesTheRequiredSeries) {
  Metrics m;
  m.set_info("abc123", "host", "qwen3_5_moe");
  m.set_memory(MemoryBudget{.free = 100 << 20, .reserve = 10 << 20, .floor = 1 << 20}, 50 << 20);
  const std::string text = m.scrape({});
  for (const char* name :
       {"rocket_requests_running", "rocket_requests_waiting", "rocket_request_success_total",
        "rocket_requests_refused_total", "rocket_prompt_tokens_total", "rocket_generation_tokens_total",
        "rocket_prefix_cache_queried_tokens_total", "rocket_prefix_cache_hit_tokens_total",
        "rocket_time_to_first_token_seconds", "rocket_inter_token_latency_seconds", "rocket_e2e_request_latency_seconds",
        "rocket_queue_time_seconds", "rocket_prefix_restore_seconds", "rocket_step_seconds", "rocket_bytes_read_per_token",
        "rocket_kv_pages_used", "rocket_kv_pages_capacity", "rocket_state_snapshots_used", "rocket_state_snapshots_capacity",
        "rocket_device_free_bytes", "rocket_memory_reserve_bytes", "rocket_memory_floor_bytes",
        "rocket_plan_residency_bytes", "rocket_memory_usable_bytes", "rocket_info", "rocket_trace_spans_dropped_total",
        "rocket_spec_verify_steps_total", "rocket_spec_draft_tokens_total", "rocket_spec_accepted_tokens_total"})
    EXPECT_NE(text.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
  EXPECT_EQ(value(text, "rocket_memory_usable_bytes"), double(89 << 20));
  EXPECT_EQ(value(text, "rocket_plan_residency_bytes"), double(50 << 20));
  m.verify_step(3, 2);
  m.verify_step(3, 0);
  const std::string after = m.scrape({});
  EXPECT_EQ(value(after, "rocket_spec_verify_steps_total"), 2.0);
  EXPECT_EQ(value(after, "rocket_spec_draft_tokens_total"), 6.0);
  EXPECT_EQ(value(after, "rocket_spec_accepted_tokens_total"), 2.0);
}

RequestTrace finished_trace(std::optional<TraceContext> parent) {
  CompletionRequest r;
  r.model = "tiny-bf16";
  r.max_tokens = 8;
  r.temperature = 0.5;
  RequestTrace t = Telemetry::begin(r, parent);
  t.admitted = t.arrived + std::chrono::milliseconds(2);
  t.was_admitted = true;
  t.prompt_tokens = 40;
  t.cached_tokens = 32;
  t.restored_snapshot = true;
  t.first_token = t.admitted + std::chrono::milliseconds(5);
  t.tokens = 8;
  t.ended = t.first_token + std::chrono::milliseconds(20);
  t.output_tokens = 8;
  t.finish_reason = "length";
  return t;
}

const nlohmann::ordered_json* attribute(const nlohmann::ordered_json& span, const std::string& key) {
  for (const auto& a : span["attributes"])
    if (a["key"] == key) return &a["value"];
  return nullptr;
}

TEST(OtlpJson, RequestSpanAndChildren) {
  std::mt19937_64 rng(5);
  const RequestTrace t = finished_trace(std::nullopt);
  const std::vector<nlohmann::ordered_json> spans = otlp_spans(t, rng);
  ASSERT_EQ(spans.size(), 4u);
  const auto& root = spans[0];
  EXPECT_EQ(root["name"], "chat.completions");
  EXPECT_EQ(root["kind"], 2);
  EXPECT_FALSE(root.contains("parentSpanId"));  // a root span has none, as the SDK writes it
  EXPECT_TRUE(std::regex_match(root["traceId"].get<std::string>(), std::regex("[0-9a-f]{32}")));
  EXPECT_TRUE(std::regex_match(root["spanId"].get<std::string>(), std::regex("[0-9a-f]{16}")));
  EXPECT_EQ(*attribute(root, "gen_ai.request.max_tokens"), (nlohmann::ordered_json{{"intValue", 8}}));
  EXPECT_EQ(*attribute(root, "gen_ai.request.temperature"), (nlohmann::ordered_json{{"doubleValue", 0.5}}));
  EXPECT_EQ((*attribute(root, "gen_ai.response.finish_reasons"))["arrayValue"]["values"][0]["stringValue"], "length");
  EXPECT_EQ(*attribute(root, "rocket.cached_tokens"), (nlohmann::ordered_json{{"intValue", 32}}));
  const uint64_t start = std::stoull(root["startTimeUnixNano"].get<std::string>());
  const uint64_t end = std::stoull(root["endTimeUnixNano"].get<std::string>());
  EXPECT_EQ(end - start, 27'000'000u);
  const char* names[] = {"queue", "prefill", "decode"};
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(spans[size_t(i)]["name"], names[i - 1]);
    EXPECT_EQ(spans[size_t(i)]["traceId"], root["traceId"]);
    EXPECT_EQ(spans[size_t(i)]["parentSpanId"], root["spanId"]);
  }
  EXPECT_EQ(*attribute(spans[2], "rocket.prefill_tokens"), (nlohmann::ordered_json{{"intValue", 8}}));
  EXPECT_EQ(*attribute(spans[2], "rocket.restored_snapshot"), (nlohmann::ordered_json{{"boolValue", true}}));
}

TEST(OtlpJson, ContinuesTheClientsTrace) {
  std::mt19937_64 rng(5);
  const std::vector<nlohmann::ordered_json> spans = otlp_spans(finished_trace(parse_traceparent(kHeader)), rng);
  EXPECT_EQ(spans[0]["traceId"], "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(spans[0]["parentSpanId"], "b7ad6b7169203331");
  EXPECT_EQ(spans[0]["flags"], 0x301);  // sampled, parent known to be remote
  EXPECT_EQ(spans[3]["traceId"], "0af7651916cd43dd8448eb211c80319c");
}

// What the client sent that changes no token (prompt_cache_key, metadata, client headers): the root
// span's rocket.client.* attributes, as the request carried them.
TEST(OtlpJson, ClientBookkeepingOnTheRootSpan) {
  std::mt19937_64 rng(5);
  CompletionRequest r;
  r.client_attributes = {{"prompt_cache_key", "thread-1"}, {"metadata.user_id", "u"}, {"header.anthropic-beta", "b1,b2"}};
  RequestTrace t = Telemetry::begin(r, std::nullopt);
  t.ended = t.arrived;
  const std::vector<nlohmann::ordered_json> spans = otlp_spans(t, rng);
  EXPECT_EQ(*attribute(spans[0], "rocket.client.prompt_cache_key"), (nlohmann::ordered_json{{"stringValue", "thread-1"}}));
  EXPECT_EQ(*attribute(spans[0], "rocket.client.metadata.user_id"), (nlohmann::ordered_json{{"stringValue", "u"}}));
  EXPECT_EQ(*attribute(spans[0], "rocket.client.header.anthropic-beta"), (nlohmann::ordered_json{{"stringValue", "b1,b2"}}));
  EXPECT_EQ(attribute(spans[1], "rocket.client.prompt_cache_key"), nullptr);  // the root's alone
}

TEST(OtlpJson, QueuedOnlyRequestHasItsQueueSpan) {
  std::mt19937_64 rng(5);
  CompletionRequest r;
  r.kind = CompletionRequest::Kind::kCompletion;
  RequestTrace t = Telemetry::begin(r, std::nullopt);
  t.ended = t.arrived + std::chrono::milliseconds(1);
  t.error = "cancelled: the client left";
  const std::vector<nlohmann::ordered_json> spans = otlp_spans(t, rng);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0]["name"], "completions");
  EXPECT_EQ(spans[0]["status"]["code"], 2);
  EXPECT_EQ(spans[1]["name"], "queue");
}

TEST(OtlpExporter, RefusesWhatIsNotAnHttpUrl) {
  for (const char* bad : {"", "localhost:4318", "ftp://host", "http://"})
    EXPECT_THROW(OtlpExporter(bad, [](size_t) {}), Error) << bad;
}

TEST(OtlpExporter, CountsTheSpansItCannotDeliver) {
  // A port nobody listens on (bound, then closed): every export fails and each span is counted dropped.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  close(fd);
  std::atomic<size_t> dropped{0};
  {
    OtlpExporter exporter(fmt::format("http://127.0.0.1:{}", port), [&](size_t n) { dropped += n; });
    for (int i = 0; i < 3; ++i) exporter.push(finished_trace(std::nullopt));
  }  // destruction flushes the queue
  EXPECT_EQ(dropped.load(), 3u * 4u);  // request, queue, prefill and decode spans of each
}

}  // namespace
}  // namespace rocket
