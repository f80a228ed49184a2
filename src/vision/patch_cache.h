// The processor's patches of recently seen images, by the SHA-256 of the bytes the client sent: an
// agent resends the same screenshot every turn, and decoding and preprocessing a 1,024² PNG again
// (~10-30 ms of CPU) would cost a resent turn more than the prefill the prefix cache saves it. The same
// bytes under one plan's processor and one server's decoder bounds give the same patches, so a hit is
// what decoding again would give. Bounded in bytes; the least recently used image goes first.
//
// Thread safety: every member may be called from any thread (the HTTP threads build prompts).
#pragma once

#include <array>
#include <cstddef>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "vision/image_hash.h"
#include "vision/image_processor.h"

namespace rocket {

class PatchCache {
 public:
  explicit PatchCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // A copy of the patches kept for `digest`, which becomes the most recently used; nullopt if none.
  std::optional<PixelPatches> find(const ImageDigest& digest);
  // Keeps `patches` for `digest` (replacing what was kept for it), evicting the least recently used
  // until the bytes fit; patches larger than the whole bound are not kept.
  void insert(const ImageDigest& digest, const PixelPatches& patches);

  size_t bytes() const;
  size_t size() const;

 private:
  using Entry = std::pair<ImageDigest, PixelPatches>;
  using Key = std::array<uint8_t, 32>;

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::map<Key, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace rocket
