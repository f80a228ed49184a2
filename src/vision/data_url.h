// `data:` URLs (RFC 2397) as the OpenAI and Anthropic clients send images: `data:image/png;base64,...`.
// Any other URL (http, https, file, ...) is refused: Rocket fetches nothing on a client's behalf.
//
// The declared media type is kept for messages only; the decoder trusts the bytes' magic, not it.
// Parameters besides `;base64` (`;charset=...`, `;name=...`) are tolerated and ignored; a URL without
// `;base64` carries percent-encoded bytes, as the RFC says. Base64 is the standard alphabet, padding
// optional, ASCII whitespace ignored (some clients wrap lines); anything else is an ImageError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rocket {

struct DataUrl {
  std::string media_type;       // lower-cased, as declared ("image/png"); empty when absent
  std::vector<uint8_t> bytes;   // the decoded payload
};

// Parses `url` and decodes its payload. REQUIRES nothing of `url`: every malformed, remote or
// oversized input is an ImageError. `max_bytes` bounds the decoded payload and is checked against
// the encoded length before anything is decoded (Kind::too_large).
DataUrl parse_data_url(std::string_view url, size_t max_bytes);

// Standard base64 (RFC 4648 section 4), whitespace ignored, padding optional but never followed by
// data; an ImageError names the first bad character's offset.
std::vector<uint8_t> decode_base64(std::string_view text);

}  // namespace rocket
