#include "http/request_head.h"

#include <string>

#include <fmt/format.h>

namespace rocket {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return out;
}

// HTTP's optional whitespace (RFC 9110 5.6.3) around a field value, and a stray CR.
std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A header value quoted in an answer: printable ASCII only (the answer is JSON, and a client's bytes
// need not be UTF-8), at most 40 characters.
std::string quoted(std::string_view value) {
  std::string out;
  for (char c : value.substr(0, 40)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return out;
}

}  // namespace

HeadVerdict check_request_head(std::string_view head, size_t max_body_bytes) {
  std::string length;
  size_t at = head.find('\n');
  while (at != std::string_view::npos && at + 1 < head.size()) {
    const size_t end = head.find('\n', at + 1);
    const std::string_view line = head.substr(at + 1, end == std::string_view::npos ? head.npos : end - at - 1);
    at = end;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string name = lower(trim_ows(line.substr(0, colon)));
    const std::string_view value = trim_ows(line.substr(colon + 1));
    if (name == "content-encoding" && !value.empty() && lower(value) != "identity")
      return {415, fmt::format("Content-Encoding '{}' is not accepted: send the request body uncompressed.", quoted(value)),
              "unsupported_content_encoding"};
    if (name != "content-length") continue;
    if (value.empty() || value.size() > 19 || value.find_first_not_of("0123456789") != std::string_view::npos ||
        (!length.empty() && length != value))
      return {400, fmt::format("Invalid Content-Length '{}'.", quoted(value)), "invalid_content_length"};
    length = value;
  }
  if (length.empty()) return {};
  const uint64_t bytes = std::stoull(length);  // at most 19 digits: fits
  if (bytes > max_body_bytes) return body_too_large(max_body_bytes);
  return {0, "", "", int64_t(bytes)};
}

HeadVerdict body_too_large(size_t max_body_bytes) {
  return {413, fmt::format("The request body is larger than this server's limit of {} bytes.", max_body_bytes),
          "request_too_large"};
}

}  // namespace rocket
