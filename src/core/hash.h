// FNV-1a 64: stable across platforms and runs, used for the chemistry fingerprint (a property of
// shapes and formats, not a security boundary) and for cheap content digests in tests.
#pragma once

#include <cstdint>
#include <string_view>

namespace rocket {

class Fnv64 {
 public:
  void update(const void* data, size_t n) {
    auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
  }
  void update(std::string_view s) { update(s.data(), s.size()); }
  uint64_t digest() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace rocket
