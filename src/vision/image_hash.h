// The identity of a client's image for the prefix cache: SHA-256 of the bytes the client sent
// (after base64), so an agent that resends the same screenshot every turn finds it cached.
//
// NOTE: not core/hash.h's FNV-1a 64: the cache serves a stored prefix to any request whose key
// matches, so a collision answers one client with another image's tokens; FNV-1a is trivially
// collided by construction. SHA-256 is nettle's (Debian's nettle-dev, linked statically like the
// other codecs): no global state, and not OpenSSL's libcrypto, which the server already loads as a
// shared library through cpp-httplib (two copies of one library's state in one process).
// Identical bytes give the same digest; different encodings of the same pixels do not (the cache is
// keyed by what was sent, which is cheap to check and never wrong).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace rocket {

struct ImageDigest {
  std::array<uint8_t, 32> bytes{};
  std::string hex() const;
  bool operator==(const ImageDigest&) const = default;
};

ImageDigest hash_image_bytes(std::span<const uint8_t> bytes);

}  // namespace rocket
