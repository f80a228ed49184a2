#include "openai/sealed_reasoning.h"

#include <array>
#include <cstdint>

namespace rocket {

namespace {

constexpr std::string_view kPrefix = "rocket.r1.";
constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> decoding_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (size_t i = 0; i < kAlphabet.size(); ++i) t[uint8_t(kAlphabet[i])] = int8_t(i);
  return t;
}
constexpr std::array<int8_t, 256> kDecode = decoding_table();

}  // namespace

std::string seal_reasoning(std::string_view text) {
  std::string out(kPrefix);
  out.reserve(kPrefix.size() + (text.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= text.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(text[i])) << 16 | uint32_t(uint8_t(text[i + 1])) << 8 | uint8_t(text[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  if (const size_t rest = text.size() - i; rest > 0) {
    const uint32_t v = uint32_t(uint8_t(text[i])) << 16 | (rest == 2 ? uint32_t(uint8_t(text[i + 1])) << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> open_reasoning(std::string_view sealed) {
  if (sealed.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  sealed.remove_prefix(kPrefix.size());
  if (sealed.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(sealed.size() / 4 * 3);
  for (size_t i = 0; i < sealed.size(); i += 4) {
    const bool last = i + 4 == sealed.size();
    const int pad = last ? (sealed[i + 3] == '=') + (sealed[i + 2] == '=') : 0;
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int8_t d = kDecode[uint8_t(sealed[i + k])];
      if (d < 0 && !(int(k) >= 4 - pad)) return std::nullopt;
      v = v << 6 | uint32_t(d < 0 ? 0 : d);
    }
    out += char(v >> 16);
    if (pad < 2) out += char((v >> 8) & 0xff);
    if (pad < 1) out += char(v & 0xff);
  }
  return out;
}

}  // namespace rocket
