// A finished request as OTLP/JSON spans (the OpenTelemetry protocol's JSON encoding: hex trace and
// span ids, camelCase fields, Unix-nanosecond times as decimal strings): one SERVER span named after
// the endpoint, with the GenAI semantic-convention attributes, and its children `queue` (arrival to
// admission), `prefill` (admission to the first token: cached and computed prompt tokens, the restored
// snapshot) and `decode` (first token to the end). A client's traceparent makes the request span its
// child: same trace id, parentSpanId its span id.
#pragma once

#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "telemetry/request_trace.h"

namespace rocket {

// The spans of one request (fresh span ids, and a fresh trace id unless continuing the client's).
std::vector<nlohmann::ordered_json> otlp_spans(const RequestTrace& r, std::mt19937_64& rng);
// An ExportTraceServiceRequest carrying `spans` for service.name "rocket".
nlohmann::ordered_json otlp_export_request(std::vector<nlohmann::ordered_json> spans);

}  // namespace rocket
