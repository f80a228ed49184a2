#include "telemetry/otlp_json.h"

#include <algorithm>
#include <string>

namespace rocket {

using Json = nlohmann::ordered_json;

namespace {

// OTLP span kinds and status codes (opentelemetry/proto/trace/v1/trace.proto).
constexpr int kInternal = 1, kServer = 2;
constexpr int kStatusUnset = 0, kStatusError = 2;
// Span flags: the low byte is the W3C trace-flags; bit 8 says whether bit 9 (the parent is remote) is known.
constexpr uint32_t kHasIsRemote = 0x100, kIsRemote = 0x200;

Json attribute(std::string key, Json value) { return Json{{"key", std::move(key)}, {"value", std::move(value)}}; }
Json str(std::string s) { return Json{{"stringValue", std::move(s)}}; }
// Integers as JSON numbers, as the OpenTelemetry JS exporter writes them (every count here is far
// below 2^53); the OTLP JSON mapping accepts a number or a decimal string.
Json integer(int64_t v) { return Json{{"intValue", v}}; }
Json real(double v) { return Json{{"doubleValue", v}}; }
Json boolean(bool v) { return Json{{"boolValue", v}}; }

Json span(const std::string& trace_id, const SpanId& id, const std::string& parent, uint32_t flags, const char* name,
          int kind, uint64_t start, uint64_t end, Json attributes, const std::string& error) {
  Json status = Json::object();
  status["code"] = error.empty() ? kStatusUnset : kStatusError;
  if (!error.empty()) status["message"] = error;
  Json out = {{"traceId", trace_id}, {"spanId", hex(id)}};
  if (!parent.empty()) out["parentSpanId"] = parent;  // a root span has none (the JS SDK omits it too)
  out.update(Json{{"name", name},
              {"kind", kind},
              {"startTimeUnixNano", std::to_string(start)},
              {"endTimeUnixNano", std::to_string(std::max(start, end))},
              {"attributes", std::move(attributes)},
              {"droppedAttributesCount", 0},
              {"events", Json::array()},
              {"droppedEventsCount", 0},
              {"status", std::move(status)},
              {"links", Json::array()},
              {"droppedLinksCount", 0},
              {"flags", flags}});
  return out;
}

}  // namespace

std::vector<Json> otlp_spans(const RequestTrace& r, std::mt19937_64& rng) {
  const std::string trace_id = hex(r.parent ? r.parent->trace_id : random_trace_id(rng));
  const uint8_t trace_flags = r.parent ? r.parent->flags : 1;  // ours are sampled: every request is exported
  const SpanId root = random_span_id(rng);
  const std::string root_hex = hex(root);
  const bool chat = r.operation == "chat.completions";

  Json attrs = Json::array({attribute("gen_ai.operation.name", str(chat ? "chat" : "text_completion")),
                            attribute("gen_ai.request.model", str(r.model))});
  if (r.max_tokens) attrs.push_back(attribute("gen_ai.request.max_tokens", integer(*r.max_tokens)));
  attrs.push_back(attribute("gen_ai.request.temperature", real(r.temperature)));
  attrs.push_back(attribute("gen_ai.usage.input_tokens", integer(r.prompt_tokens)));
  attrs.push_back(attribute("gen_ai.usage.output_tokens", integer(r.output_tokens)));
  if (!r.finish_reason.empty())
    attrs.push_back(attribute("gen_ai.response.finish_reasons",
                              Json{{"arrayValue", {{"values", Json::array({str(r.finish_reason)})}}}}));
  attrs.push_back(attribute("rocket.cached_tokens", integer(r.cached_tokens)));
  for (const auto& [key, value] : r.client) attrs.push_back(attribute("rocket.client." + key, str(value)));

  std::vector<Json> spans;
  const uint32_t root_flags = trace_flags | kHasIsRemote | (r.parent ? kIsRemote : 0);
  spans.push_back(span(trace_id, root, r.parent ? hex(r.parent->span_id) : "", root_flags, r.operation.c_str(), kServer,
                       r.unix_nanos(r.arrived), r.unix_nanos(r.ended), std::move(attrs), r.error));
  const uint32_t child_flags = trace_flags | kHasIsRemote;
  auto child = [&](const char* name, RequestTrace::Clock::time_point from, RequestTrace::Clock::time_point to, Json a) {
    spans.push_back(span(trace_id, random_span_id(rng), root_hex, child_flags, name, kInternal, r.unix_nanos(from),
                         r.unix_nanos(to), std::move(a), ""));
  };
  // A request cancelled or refused while queued has only its queue time.
  child("queue", r.arrived, r.was_admitted ? r.admitted : r.ended, Json::array());
  if (!r.was_admitted) return spans;
  const bool decoded = r.tokens > 0;
  child("prefill", r.admitted, decoded ? r.first_token : r.ended,
        Json::array({attribute("rocket.cached_tokens", integer(r.cached_tokens)),
                     attribute("rocket.prefill_tokens", integer(r.prompt_tokens - r.cached_tokens)),
                     attribute("rocket.restored_snapshot", boolean(r.restored_snapshot)),
                     attribute("rocket.restore_seconds", real(r.restore_seconds))}));
  if (decoded)
    child("decode", r.first_token, r.ended, Json::array({attribute("gen_ai.usage.output_tokens", integer(r.output_tokens))}));
  return spans;
}

Json otlp_export_request(std::vector<Json> spans) {
  Json resource = {{"attributes", Json::array({attribute("service.name", str("rocket"))})}, {"droppedAttributesCount", 0}};
  Json scope = {{"scope", {{"name", "rocket"}}}, {"spans", std::move(spans)}};
  return Json{{"resourceSpans", Json::array({Json{{"resource", std::move(resource)}, {"scopeSpans", Json::array({scope})}}})}};
}

}  // namespace rocket
