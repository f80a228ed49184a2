// A traceparent header as a client sends it. Parsing must never crash or read past the header, and
// whatever it accepts must be the header's own ids: the trace id and parent id written back in hex
// are the characters they were read from, and neither is all zero.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "telemetry/trace_context.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view header(reinterpret_cast<const char*>(data), size);
  const std::optional<rocket::TraceContext> c = rocket::parse_traceparent(header);
  if (!c) return 0;
  if (header.size() < 55 || rocket::hex(c->trace_id) != header.substr(3, 32) ||
      rocket::hex(c->span_id) != header.substr(36, 16) || rocket::hex(&c->flags, 1) != header.substr(53, 2))
    std::abort();
  if (rocket::hex(c->trace_id) == std::string(32, '0') || rocket::hex(c->span_id) == std::string(16, '0')) std::abort();
  return 0;
}
