// What a complete request head (request line, headers, the blank line) declares about its body,
// checked before any of the body is read (http/bounded_server.h reads heads and calls it). cpp-httplib
// 0.11 would read and drop a body over the payload limit before answering 413, read "Content-Length:
// -5" as a huge length, and inflate a compressed body with no limit past the length it checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rocket {

struct HeadVerdict {
  int status = 0;  // 0: read the body; else the HTTP status to refuse with
  std::string message, code;
  int64_t body_bytes = -1;  // the declared Content-Length; -1: none (no body, or chunked)
};

// 415 for a Content-Encoding other than identity; 400 for a Content-Length that is not a decimal of at
// most 19 digits, or two that differ; 413 for one over `max_body_bytes`. Header names are matched
// without case, values without surrounding blanks.
HeadVerdict check_request_head(std::string_view head, size_t max_body_bytes);

// The 413 for a body over `max_body_bytes` (check_request_head's, and httplib's own when a chunked body
// grows past the limit).
HeadVerdict body_too_large(size_t max_body_bytes);

}  // namespace rocket
