// Scalar formats real checkpoints use, and exact conversions between them and fp32.
// bf16/f16 round to nearest even; e4m3 is the OCP FP8 E4M3 (max 448, no infinities, NaN = 0x7f/0xff);
// e2m1 is the OCP FP4 E2M1 used by NVFP4 (values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace rocket {

enum class DType : uint8_t { kBF16, kF16, kF32, kF8E4M3, kU8, kI8, kI32, kI64 };

// Width in bytes of one element as stored in safetensors (U8 is packed FP4: two e2m1 per byte).
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kBF16: case DType::kF16: return 2;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kF8E4M3: case DType::kU8: case DType::kI8: return 1;
  }
  return 0;
}

// Safetensors spelling ("BF16", "F8_E4M3", ...). parse returns false on an unknown name.
std::string_view dtype_name(DType t);
bool parse_dtype(std::string_view name, DType* out);

inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t bits_from_f32(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = bits_from_f32(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

float e4m3_to_f32(uint8_t v);
uint8_t f32_to_e4m3(float f);  // saturates to ±448

// e2m1 nibble (bit 3 = sign) <-> float. f32_to_e2m1 rounds to nearest, ties to even, saturates at 6.
float e2m1_to_f32(uint8_t nibble);
uint8_t f32_to_e2m1(float f);

constexpr float kE4M3Max = 448.0f;
constexpr float kE2M1Max = 6.0f;

}  // namespace rocket
