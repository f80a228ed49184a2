#include "core/dtype.h"

#include <algorithm>
#include <array>

namespace rocket {

namespace {
struct Named { DType t; std::string_view name; };
constexpr Named kNames[] = {
    {DType::kBF16, "BF16"}, {DType::kF16, "F16"}, {DType::kF32, "F32"}, {DType::kF8E4M3, "F8_E4M3"},
    {DType::kU8, "U8"},     {DType::kI8, "I8"},   {DType::kI32, "I32"}, {DType::kI64, "I64"},
};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& n : kNames) if (n.t == t) return n.name;
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) {
  for (const auto& n : kNames) {
    if (n.name == name) { *out = n.t; return true; }
  }
  return false;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  if (exp == 0) {
    float v = std::ldexp(float(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f) {
  uint32_t u = bits_from_f32(f), sign = (u >> 16) & 0x8000u;
  float a = std::fabs(f);
  if (std::isnan(f)) return uint16_t(sign | 0x7e00u);
  if (a >= 65520.0f) return uint16_t(sign | 0x7c00u);
  if (a < 6.103515625e-05f) {  // subnormal: quantum 2^-24, rint rounds half to even
    return uint16_t(sign | uint32_t(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t au = u & 0x7fffffffu;
  au += 0xfffu + ((au >> 13) & 1u);
  return uint16_t(sign | ((au >> 13) - (112u << 10)));
}

float e4m3_to_f32(uint8_t v) {
  uint32_t sign = v & 0x80u, exp = (v >> 3) & 0xf, man = v & 0x7u;
  if (exp == 0xf && man == 0x7) return std::nanf("");
  float r = exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(float(8 + man), int(exp) - 10);
  return sign ? -r : r;
}

uint8_t f32_to_e4m3(float f) {
  // The 127 non-negative finite codes are monotonic in value, so nearest = binary search + compare.
  static const auto kTable = [] {
    std::array<float, 127> t{};
    for (int c = 0; c < 127; ++c) t[c] = e4m3_to_f32(uint8_t(c));
    return t;
  }();
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fmin(std::fabs(f), kE4M3Max);
  int hi = int(std::lower_bound(kTable.begin(), kTable.end(), a) - kTable.begin());
  if (hi == 0) return sign;
  int lo = hi - 1;
  float dlo = a - kTable[lo], dhi = kTable[hi] - a;
  int c = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) == 0 ? lo : hi);  // ties to even code
  return uint8_t(sign | c);
}

float e2m1_to_f32(uint8_t nibble) {
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float v = kValues[nibble & 7];
  return (nibble & 8) ? -v : v;
}

uint8_t f32_to_e2m1(float f) {
  // Midpoints between neighbouring magnitudes; at an exact midpoint the even code wins.
  uint8_t sign = std::signbit(f) ? 8 : 0;
  float a = std::fabs(f);
  uint8_t c = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3
            : a <= 2.5f ? 4 : a < 3.5f ? 5 : a <= 5.0f ? 6 : 7;
  return sign | c;
}

}  // namespace rocket
