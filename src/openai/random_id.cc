#include "openai/random_id.h"

namespace rocket {

std::string random_id(std::string_view prefix, size_t length, std::mt19937_64& rng) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id(prefix);
  // NOTE: modulo, not std::uniform_int_distribution, whose algorithm differs between standard
  // libraries; the bias of 2^64 mod 62 is immaterial for an id.
  for (size_t i = 0; i < length; ++i) id += kAlphabet[rng() % kAlphabet.size()];
  return id;
}

}  // namespace rocket
