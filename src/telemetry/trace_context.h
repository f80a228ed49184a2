// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` header a client sends to
// continue its trace, and the ids of the spans this server starts. The header is client input: parsing
// reads at most its fixed 55 characters of version 00 (a later version's longer form is accepted by
// its first 55, as the spec asks), checks every character, and rejects the all-zero ids.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace rocket {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

struct TraceContext {
  TraceId trace_id{};
  SpanId span_id{};  // the caller's span: the parent of the spans this server starts for it
  uint8_t flags = 0;  // trace-flags; bit 0 is "sampled"
};

// nullopt for anything but a well-formed traceparent with nonzero ids (a malformed header starts a
// new trace, as the spec asks).
std::optional<TraceContext> parse_traceparent(std::string_view header);

// Lowercase hex, as traceparent and OTLP/JSON write ids.
std::string hex(const uint8_t* bytes, size_t n);
template <size_t N>
std::string hex(const std::array<uint8_t, N>& id) { return hex(id.data(), N); }

// Random nonzero ids (the spec's requirement on both).
TraceId random_trace_id(std::mt19937_64& rng);
SpanId random_span_id(std::mt19937_64& rng);

}  // namespace rocket
