// The H200 NVFP4 register code (compiler/nvfp4_code.h): decoding what conditioning encodes must give
// back every weight exactly, bf16 images and scale words read as numbers, for every nibble and every
// e4m3 scale (zero, negative, subnormal and NaN included).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "compiler/nvfp4_code.h"
#include "core/dtype.h"
#include "core/error.h"

namespace rocket::nvfp4_code {
namespace {

// The weight the kernels compute from a code word's image half and a scale word half, as a number:
// image (e2m1 * 2^-126) times scale word (s * 2^119) times 2^7.
double decoded(uint32_t image_word, int half, uint32_t multiplier) {
  const uint16_t img = uint16_t(image_word >> (16 * half)), sw = uint16_t(multiplier >> (16 * half));
  return double(bf16_to_f32(img)) * double(bf16_to_f32(sw)) * 0x1p7;
}

TEST(Nvfp4Code, EveryNibbleInEveryPositionDecodesExactly) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 4096; ++trial) {
    uint32_t q = rng();
    if (trial < 16) q = 0x11111111u * uint32_t(trial);  // each nibble value everywhere
    uint32_t w[4];
    images(encode_word(q), w);
    for (int i = 0; i < 8; ++i) {
      const uint16_t half = uint16_t(w[i / 2] >> (16 * (i % 2)));
      ASSERT_EQ(double(bf16_to_f32(half)), double(e2m1_to_f32(uint8_t(q >> (4 * i) & 15u))) * 0x1p-126)
          << "word " << std::hex << q << " element " << i;
    }
  }
}

TEST(Nvfp4Code, EveryScaleDecodesExactly) {
  for (int s = 0; s < 256; ++s) {
    if ((s & 0x7f) == 0x7f) {
      EXPECT_THROW(encode_scale(uint8_t(s)), Error) << s;
      continue;
    }
    const double want = std::fabs(double(e4m3_to_f32(uint8_t(s))));
    const uint32_t sw = scale_word(encode_scale(uint8_t(s)));
    if (want == 0) continue;  // a zero scale zeroes its weights instead (below)
    EXPECT_EQ(double(bf16_to_f32(uint16_t(sw))), want * 0x1p119) << s;
    EXPECT_EQ(sw >> 16, sw & 0xffffu) << s;
  }
}

TEST(Nvfp4Code, MatrixDecodesToTheCheckpointWeights) {
  constexpr int kRows = 8, kCols = 64;
  std::mt19937 rng(11);
  std::vector<uint8_t> packed(kRows * kCols / 2), scales(kRows * kCols / 16);
  for (auto& b : packed) b = uint8_t(rng());
  for (size_t i = 0; i < scales.size(); ++i) {
    scales[i] = uint8_t(rng() % 0x7f) | (i % 3 == 0 ? 0x80 : 0);  // every third negative
    if (i % 5 == 0) scales[i] &= 0x80;                           // zero (+0 and -0)
  }
  std::vector<uint8_t> codes(packed.size(), 0xa5), scale_codes(scales.size(), 0xa5);
  encode_matrix(packed.data(), scales.data(), kRows, kCols, codes.data(), scale_codes.data());
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; c += 8) {
      const int at = (r * kCols + c) / 2;
      uint32_t q, code;
      std::memcpy(&q, packed.data() + at, 4);
      std::memcpy(&code, codes.data() + at, 4);
      const uint8_t s = scales[(r * kCols + c) / 16];
      uint32_t w[4];
      images(code, w);
      for (int i = 0; i < 8; ++i) {
        const double want = double(e2m1_to_f32(uint8_t(q >> (4 * i) & 15u))) * double(e4m3_to_f32(s));
        EXPECT_EQ(decoded(w[i / 2], i % 2, scale_word(scale_codes[(r * kCols + c) / 16])), want)
            << "row " << r << " col " << c + i << " scale 0x" << std::hex << int(s);
      }
    }
}

TEST(Nvfp4Code, RefusesANanScale) {
  std::vector<uint8_t> packed(8, 0x11), scales(1, 0x7f), codes(8);
  EXPECT_THROW(encode_matrix(packed.data(), scales.data(), 1, 16, codes.data(), nullptr), Error);
}

}  // namespace
}  // namespace rocket::nvfp4_code
