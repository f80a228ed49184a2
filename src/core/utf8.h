// UTF-8 for every room: encoding a code point, and decoding by Unicode's definition of well-formed
// UTF-8 (Table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF). What is not well formed
// is cut into "maximal subparts", the Unicode practice shared by Python's errors="replace", Rust's
// from_utf8_lossy and the WHATWG TextDecoder, so every reader here agrees on where a bad sequence ends.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rocket {

// REQUIRES: cp is a Unicode scalar value (<= 0x10FFFF, not a surrogate).
inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

enum class Utf8 { kValid, kInvalid, kTruncated };

struct Utf8Scan {
  size_t len;    // >= 1: bytes of the code point (kValid), of the maximal ill-formed subpart (kInvalid),
                 // or of the well-formed prefix that ran into the end of the input (kTruncated)
  Utf8 kind;
  char32_t cp;   // kValid: the code point; otherwise U+FFFD
};

// The sequence starting at s[at]. REQUIRES: at < s.size().
Utf8Scan scan_utf8(std::string_view s, size_t at);

bool is_valid_utf8(std::string_view s);

// Appends `bytes` to `out` as well-formed UTF-8, each maximal ill-formed subpart replaced by U+FFFD.
// When `final` is false, a trailing sequence that is well formed so far but incomplete is left
// unconsumed, since later bytes may complete it. Returns the number of bytes consumed.
size_t append_utf8_lossy(std::string_view bytes, std::string& out, bool final);

// For readers that must not lose a byte (the chat-template engine's Python strings): calls
// f(cp, pos, len) for each code point of s in order, where a byte that does not begin a well-formed
// sequence is a code point of its own, the byte's value (its Latin-1 reading).
template <typename F>
void for_each_code_point(std::string_view s, F&& f) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Scan sc = scan_utf8(s, pos);
    if (sc.kind == Utf8::kValid) {
      f(sc.cp, pos, sc.len);
      pos += sc.len;
    } else {
      f(char32_t(static_cast<unsigned char>(s[pos])), pos, size_t(1));
      ++pos;
    }
  }
}

// The code points of s, and their count, as for_each_code_point reads them.
std::vector<char32_t> decode_utf8(std::string_view s);
size_t code_point_count(std::string_view s);

}  // namespace rocket
