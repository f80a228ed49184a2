#include "compiler/nvfp4_code.h"

#include <array>
#include <cstring>

#include "core/error.h"

namespace rocket::nvfp4_code {
namespace {

// The 32 image bits, in a fixed order: bit r = j * 8 + t of a packed vector is image j's t-th kept bit.
constexpr std::array<int, 8> kKept = {6, 7, 8, 15, 22, 23, 24, 31};

uint32_t pack_images(const uint32_t w[4]) {
  uint32_t v = 0;
  for (int j = 0; j < 4; ++j)
    for (int t = 0; t < 8; ++t) v |= (w[j] >> kKept[t] & 1u) << (j * 8 + t);
  return v;
}

// The images a ModelOpt word must decode to: image j = (element 2j, element 2j + 1).
uint32_t target(uint32_t q) {
  uint32_t w[4];
  for (int j = 0; j < 4; ++j) {
    const uint32_t lo = q >> (8 * j) & 15u, hi = q >> (8 * j + 4) & 15u;
    w[j] = (lo >> 3) << 15 | (lo & 7u) << 6 | (hi >> 3) << 31 | (hi & 7u) << 22;
  }
  return pack_images(w);
}

// encode_word as four byte tables: the map q -> code is linear over GF(2).
struct Tables {
  uint32_t byte[4][256];
  Tables() {
    // Decoder matrix: column i = the packed images of code bit i. Invert it by Gauss-Jordan on rows
    // [decoder row r | identity row r]; afterwards row i's right half is row i of the inverse.
    uint32_t left[32], right[32];
    for (int r = 0; r < 32; ++r) {
      left[r] = 0;
      right[r] = 1u << r;
    }
    for (int i = 0; i < 32; ++i) {
      uint32_t w[4];
      images(1u << i, w);
      const uint32_t col = pack_images(w);
      for (int r = 0; r < 32; ++r) left[r] |= (col >> r & 1u) << i;
    }
    for (int c = 0; c < 32; ++c) {
      int pivot = c;
      while (pivot < 32 && !(left[pivot] >> c & 1u)) ++pivot;
      CHECK(pivot < 32, "nvfp4 register code: the decoder is not invertible");
      std::swap(left[c], left[pivot]);
      std::swap(right[c], right[pivot]);
      for (int r = 0; r < 32; ++r)
        if (r != c && (left[r] >> c & 1u)) left[r] ^= left[c], right[r] ^= right[c];
    }
    // code(packed target v): bit i = parity(right[i] & v).
    auto code_of = [&](uint32_t v) {
      uint32_t code = 0;
      for (int i = 0; i < 32; ++i) code |= uint32_t(__builtin_parity(right[i] & v)) << i;
      return code;
    };
    for (int k = 0; k < 4; ++k)
      for (uint32_t v = 0; v < 256; ++v) byte[k][v] = code_of(target(v << (8 * k)));
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t encode_word(uint32_t q) {
  const Tables& t = tables();
  return t.byte[0][q & 255u] ^ t.byte[1][q >> 8 & 255u] ^ t.byte[2][q >> 16 & 255u] ^ t.byte[3][q >> 24];
}

uint8_t encode_scale(uint8_t e4m3) {
  const int e = e4m3 >> 3 & 15, m = e4m3 & 7;
  if ((e4m3 & 0x7f) == 0x7f) fail("nvfp4: a block scale is NaN (e4m3 0x{:02x})", e4m3);
  if (e == 0 && m == 0) return 0;
  int exp = e - 7, mant = m;  // |s| = 2^exp * (1 + mant / 8)
  if (e == 0) {               // subnormal m * 2^-9: shift the leading one out of the mantissa
    exp = -9;
    while (mant < 8) mant <<= 1, --exp;
    mant -= 8;
    exp += 3;
  }
  return uint8_t((exp + kScaleCodeExpBias) << 3 | mant);
}

void encode_matrix(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols, uint8_t* codes,
                   uint8_t* scale_codes) {
  CHECK(cols % 16 == 0, "nvfp4: columns come in blocks of 16");
  const int64_t blocks = rows * cols / 16;
  for (int64_t b = 0; b < blocks; ++b) encode_scale(scales[b]);  // refuses a NaN before anything is written
  tables();
  // About 1 GB/s of packed weights per thread: threads keep an a3b blob's 16 GB within disk speed.
#pragma omp parallel for schedule(static) if (blocks >= (1 << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t s = scales[b];
    if (scale_codes) scale_codes[b] = encode_scale(s);
    if (!codes) continue;
    for (int w = 0; w < 2; ++w) {  // a block's 16 weights are two 32-bit words
      uint32_t q;
      std::memcpy(&q, packed + 8 * b + 4 * w, 4);
      if ((s & 0x7f) == 0) q = 0;                // zero scale: zero weights
      else if (s & 0x80) q ^= 0x88888888u;       // negative scale: the sign moves into the weights
      const uint32_t e = encode_word(q);
      std::memcpy(codes + 8 * b + 4 * w, &e, 4);
    }
  }
}

}  // namespace rocket::nvfp4_code
