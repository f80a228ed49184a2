#include "telemetry/trace_context.h"

#include <algorithm>

namespace rocket {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is invalid in traceparent
}

// Lowercase hex of exactly 2·N characters into `out`.
template <size_t N>
bool parse_hex(std::string_view s, std::array<uint8_t, N>& out) {
  if (s.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = uint8_t(hi << 4 | lo);
  }
  return true;
}

template <size_t N>
bool all_zero(const std::array<uint8_t, N>& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

template <size_t N>
std::array<uint8_t, N> random_id(std::mt19937_64& rng) {
  std::array<uint8_t, N> id{};
  while (all_zero(id))
    for (size_t i = 0; i < N; i += 8) {
      const uint64_t r = rng();
      for (size_t j = 0; j < 8 && i + j < N; ++j) id[i + j] = uint8_t(r >> (8 * j));
    }
  return id;
}

}  // namespace

std::optional<TraceContext> parse_traceparent(std::string_view h) {
  // version "-" trace-id "-" parent-id "-" trace-flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55 characters.
  constexpr size_t kLength = 55;
  if (h.size() < kLength) return std::nullopt;
  std::array<uint8_t, 1> version{}, flags{};
  if (!parse_hex(h.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
  // Version 00 is exactly 55 characters; a later version may append "-" and more, which is ignored.
  if (version[0] == 0 ? h.size() != kLength : h.size() > kLength && h[kLength] != '-') return std::nullopt;
  if (h[2] != '-' || h[35] != '-' || h[52] != '-') return std::nullopt;
  TraceContext c;
  if (!parse_hex(h.substr(3, 32), c.trace_id) || !parse_hex(h.substr(36, 16), c.span_id) ||
      !parse_hex(h.substr(53, 2), flags))
    return std::nullopt;
  if (all_zero(c.trace_id) || all_zero(c.span_id)) return std::nullopt;
  c.flags = flags[0];
  return c;
}

std::string hex(const uint8_t* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) s[2 * i] = kDigits[bytes[i] >> 4], s[2 * i + 1] = kDigits[bytes[i] & 15];
  return s;
}

TraceId random_trace_id(std::mt19937_64& rng) { return random_id<16>(rng); }
SpanId random_span_id(std::mt19937_64& rng) { return random_id<8>(rng); }

}  // namespace rocket
