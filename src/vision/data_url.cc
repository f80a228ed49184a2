#include "vision/data_url.h"

#include <array>

#include <fmt/format.h>

#include "vision/image_error.h"

namespace rocket {
namespace {

// NOTE: hand-written rather than OpenSSL's EVP_DecodeUpdate (the Debian library at hand): that one
// treats '-' as the end of the data and accepts whatever follows it, which a parser of client input
// should refuse. The decoder is a table lookup and a 24-bit accumulator; tests/data_url_test.cc
// checks it against RFC 4648's vectors and every malformed shape.
constexpr int8_t kInvalid = -1, kSpace = -2, kPad = -3;

constexpr std::array<int8_t, 256> base64_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = kInvalid;
  constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < alphabet.size(); ++i) t[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
  for (char c : {' ', '\t', '\n', '\r', '\f', '\v'}) t[static_cast<uint8_t>(c)] = kSpace;
  t['='] = kPad;
  return t;
}
constexpr auto kBase64 = base64_table();

[[noreturn]] void malformed(const std::string& message) { throw ImageError(ImageError::Kind::malformed, message); }

[[noreturn]] void too_large(size_t max_bytes) {
  throw ImageError(ImageError::Kind::too_large,
                   fmt::format("the image is larger than this server's limit of {} bytes", max_bytes));
}

std::vector<uint8_t> base64_bytes(std::string_view text, size_t max_bytes) {
  std::vector<uint8_t> out;
  out.reserve(std::min(text.size() / 4 * 3 + 3, max_bytes));
  uint32_t acc = 0;
  int sextets = 0;     // data characters in the current quantum (0..3)
  size_t pads = 0;     // '=' seen; once nonzero only '=' and whitespace may follow
  size_t quantum = 0;  // data characters + pads, for the padding's length check
  for (size_t i = 0; i < text.size(); ++i) {
    const int8_t v = kBase64[static_cast<uint8_t>(text[i])];
    if (v == kSpace) continue;
    if (v == kInvalid) malformed(fmt::format("invalid base64: byte 0x{:02x} at offset {}", static_cast<uint8_t>(text[i]), i));
    ++quantum;
    if (v == kPad) {
      ++pads;
      continue;
    }
    if (pads) malformed(fmt::format("invalid base64: data after '=' padding at offset {}", i));
    acc = (acc << 6) | static_cast<uint32_t>(v);
    if (++sextets == 4) {
      if (out.size() + 3 > max_bytes) too_large(max_bytes);
      out.push_back(static_cast<uint8_t>(acc >> 16));
      out.push_back(static_cast<uint8_t>(acc >> 8));
      out.push_back(static_cast<uint8_t>(acc));
      acc = 0;
      sextets = 0;
    }
  }
  // A last quantum of 2 or 3 characters carries 1 or 2 bytes; 1 character carries none.
  if (sextets == 1) malformed("invalid base64: the data ends inside a byte (a length of 4n+1 characters)");
  if (pads && (pads > 2 || quantum % 4 != 0)) malformed("invalid base64: wrong '=' padding");
  if (sextets == 0 && pads) malformed("invalid base64: '=' padding after a whole quantum");
  if (sextets >= 2) {
    if (out.size() + static_cast<size_t>(sextets - 1) > max_bytes) too_large(max_bytes);
    acc <<= 6 * (4 - sextets);
    out.push_back(static_cast<uint8_t>(acc >> 16));
    if (sextets == 3) out.push_back(static_cast<uint8_t>(acc >> 8));
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<uint8_t> percent_bytes(std::string_view text, size_t max_bytes) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_bytes) too_large(max_bytes);
    if (text[i] != '%') {
      out.push_back(static_cast<uint8_t>(text[i]));
      continue;
    }
    const int hi = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_value(text[i + 2]) : -1;
    if (lo < 0) malformed(fmt::format("invalid percent-encoding in the data: URL at offset {}", i));
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equals_lower(std::string_view s, std::string_view lower_word) {
  if (s.size() != lower_word.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (lower(s[i]) != lower_word[i]) return false;
  return true;
}

// The URL's scheme (RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) then ':'), lower-cased;
// empty when the text does not start with one.
std::string scheme_of(std::string_view url) {
  std::string scheme;
  for (char c : url) {
    if (c == ':') return scheme;
    const char l = lower(c);
    const bool ok = (l >= 'a' && l <= 'z') || (!scheme.empty() && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'));
    if (!ok || scheme.size() >= 32) return {};
    scheme.push_back(l);
  }
  return {};
}

}  // namespace

std::vector<uint8_t> decode_base64(std::string_view text) { return base64_bytes(text, SIZE_MAX); }

DataUrl parse_data_url(std::string_view url, size_t max_bytes) {
  const std::string scheme = scheme_of(url);
  if (scheme != "data") {
    if (scheme.empty())
      throw ImageError(ImageError::Kind::refused, "the image URL is not a URL; send the image as a data: URL (data:image/png;base64,...)");
    throw ImageError(ImageError::Kind::refused,
                     fmt::format("remote image URLs are not fetched ({}:); send the image as a data: URL (data:image/png;base64,...)", scheme));
  }
  const std::string_view rest = url.substr(5);
  const size_t comma = rest.find(',');
  if (comma == std::string_view::npos) malformed("the data: URL has no ',' before its data");
  const std::string_view header = rest.substr(0, comma), payload = rest.substr(comma + 1);

  DataUrl result;
  bool base64 = false;
  size_t start = 0;
  for (bool first = true; start <= header.size(); first = false) {
    size_t end = header.find(';', start);
    if (end == std::string_view::npos) end = header.size();
    std::string_view part = header.substr(start, end - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (first) {
      for (char c : part) result.media_type.push_back(lower(c));
    } else if (equals_lower(part, "base64")) {
      base64 = true;
    }
    start = end + 1;
  }
  if (payload.empty()) malformed("the data: URL carries no data");
  result.bytes = base64 ? base64_bytes(payload, max_bytes) : percent_bytes(payload, max_bytes);
  return result;
}

}  // namespace rocket
