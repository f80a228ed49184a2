#include "core/utf8.h"

#include <cstdint>

namespace rocket {

Utf8Scan scan_utf8(std::string_view s, size_t at) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + at;
  const size_t n = s.size() - at;
  const uint8_t b0 = p[0];
  if (b0 < 0x80) return {1, Utf8::kValid, char32_t(b0)};
  // The second byte's range depends on the first (Table 3-7); that is what excludes overlong forms
  // (E0, F0), surrogates (ED) and code points above U+10FFFF (F4).
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 == 0xE0) {
    need = 2, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    need = 2;
  } else if (b0 == 0xED) {
    need = 2, hi = 0x9F;
  } else if (b0 == 0xF0) {
    need = 3, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 3;
  } else if (b0 == 0xF4) {
    need = 3, hi = 0x8F;
  } else {
    return {1, Utf8::kInvalid, U'\uFFFD'};  // a continuation byte, C0/C1 or F5..FF
  }
  char32_t cp = b0 & (0x3F >> need);
  for (size_t i = 1; i <= need; ++i) {
    if (i >= n) return {i, Utf8::kTruncated, U'\uFFFD'};
    if (p[i] < lo || p[i] > hi) return {i, Utf8::kInvalid, U'\uFFFD'};
    cp = (cp << 6) | (p[i] & 0x3F);
    lo = 0x80, hi = 0xBF;
  }
  return {need + 1, Utf8::kValid, cp};
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Scan sc = scan_utf8(s, i);
    if (sc.kind != Utf8::kValid) return false;
    i += sc.len;
  }
  return true;
}

size_t append_utf8_lossy(std::string_view bytes, std::string& out, bool final) {
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    // Copy the longest ASCII run at once: it is most of most text.
    size_t j = i;
    while (j < n && static_cast<unsigned char>(bytes[j]) < 0x80) ++j;
    out.append(bytes.data() + i, j - i);
    i = j;
    if (i == n) break;
    const Utf8Scan sc = scan_utf8(bytes, i);
    if (sc.kind == Utf8::kValid) {
      out.append(bytes.data() + i, sc.len);
    } else if (sc.kind == Utf8::kTruncated && !final) {
      return i;  // may complete with the next bytes
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the maximal subpart
    }
    i += sc.len;
  }
  return n;
}

std::vector<char32_t> decode_utf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for_each_code_point(s, [&](char32_t cp, size_t, size_t) { out.push_back(cp); });
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for_each_code_point(s, [&](char32_t, size_t, size_t) { ++n; });
  return n;
}

}  // namespace rocket
