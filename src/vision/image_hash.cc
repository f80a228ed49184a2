#include "vision/image_hash.h"

#include <nettle/sha2.h>

namespace rocket {

std::string ImageDigest::hex() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return out;
}

ImageDigest hash_image_bytes(std::span<const uint8_t> bytes) {
  static_assert(SHA256_DIGEST_SIZE == 32);
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, bytes.size(), bytes.data());
  ImageDigest digest;
  sha256_digest(&ctx, digest.bytes.size(), digest.bytes.data());
  return digest;
}

}  // namespace rocket
