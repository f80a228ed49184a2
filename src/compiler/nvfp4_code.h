// The H200 NVFP4 register code: how conditioning re-encodes NVFP4 weights for an h200 plan so that
// the kernels (kernels/cuda/primitives/nvfp4.cuh) turn eight weights into bf16 tensor-core operands with eight
// integer instructions, and a block scale into its bf16 multiplier with two.
//
// Why: decoding ModelOpt's layout (element i of a 32-bit word in nibble i) made the expert kernels
// issue-bound at decode buckets of 16 and more (3.35 instructions per weight): a bf16 image of two
// weights cost a mask, a multiply and a mask, an e4m3 scale ~5 conversions. Conditioning is free at
// run time, so the blob stores a layout the registers decode cheaply instead.
//
// Weights. An image word j (j = 0..3) of a 32-bit code word is the bf16 pair (element 2j, element
// 2j + 1) of the same eight weights: each weight's e2m1 magnitude bits (e e m) at bf16 bits 8..6 of
// its half and its sign at bit 15, so the half reads e2m1 * 2^-126 exactly (see nvfp4.cuh). The
// decoder (images() below: four rotations and four three-input logic ops) is linear over GF(2) and
// invertible, so conditioning stores code = decoder^-1(images), per word, by four byte-table lookups.
// No code with fewer rotations exists: with three, the four images read 32 bit positions of four registers,
// so each of the word's 32 bits would have to feed exactly one image bit, a tiling of the word by the
// image pattern, which an exhaustive search shows does not exist.
//
// Block scales. Each e4m3 scale s is stored as the unsigned e5m3 byte ((E + 9) << 3 | m) of |s| =
// 2^E * (1 + m / 8), E in [-9, 8]: every nonzero e4m3 value, subnormals included, is such a number.
// The bf16 multiplier word (s * 2^119 in both halves) is then (byte, 0, byte, 0) * 16 + kScaleWordBias.
// A zero scale zeroes its block's nibbles (the weights are zero whatever the code), a negative one
// flips their signs, and a NaN scale is refused.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define ROCKET_HOST_DEVICE __host__ __device__
#else
#define ROCKET_HOST_DEVICE
#endif

namespace rocket::nvfp4_code {

inline constexpr uint32_t kImageBits = 0x81C081C0u;  // sign bit 15 and bits 8..6 of both bf16 halves
inline constexpr int kScaleCodeExpBias = 9;          // e5m3 exponent field = E + 9
inline constexpr uint32_t kScaleWordBias = 0x76807680u;  // bf16 exponent field E + 127 + 119 = field + 237
inline constexpr float kScaleWordFactor = 0x1p119f;     // the scale word is s * 2^119

// A rotation right (nvcc emits one funnel shift).
ROCKET_HOST_DEVICE constexpr uint32_t rotr(uint32_t x, int s) { return (x >> s) | (x << ((32 - s) & 31)); }

// The decoder, shared by the kernels and the encoder: the four bf16x2 images of one code word.
ROCKET_HOST_DEVICE constexpr void images(uint32_t code, uint32_t w[4]) {
  const uint32_t r2 = rotr(code, 2), r6 = rotr(code, 6), r8 = rotr(code, 8), r12 = rotr(code, 12);
  w[0] = code & kImageBits;
  w[1] = r12 & kImageBits;
  w[2] = (r2 ^ r6) & kImageBits;
  w[3] = (r2 ^ r8) & kImageBits;
}

// The bf16x2 multiplier word of one scale code byte: s * 2^119 in both halves. (The kernels build the
// same word from a byte of a packed register: nvfp4.cuh nvfp4_scale_word.)
ROCKET_HOST_DEVICE constexpr uint32_t scale_word(uint8_t code) {
  return (uint32_t(code) | uint32_t(code) << 16) * 16u + kScaleWordBias;
}

// The code word of eight e2m1 weights (element i in nibble i of q, ModelOpt's order).
uint32_t encode_word(uint32_t q);

// The scale code byte of one e4m3 block scale (0 for a zero scale). Error on a NaN.
uint8_t encode_scale(uint8_t e4m3);

// One NVFP4 matrix [rows][cols] (packed e2m1 [rows][cols / 2], e4m3 scales [rows][cols / 16]) into its
// code: `codes` gets the weight code words (same size as `packed`), `scale_codes` the scale bytes.
// Either output may be null. REQUIRES: cols % 16 == 0.
void encode_matrix(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols, uint8_t* codes,
                   uint8_t* scale_codes);

}  // namespace rocket::nvfp4_code
