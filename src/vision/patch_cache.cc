#include "vision/patch_cache.h"

namespace rocket {

namespace {

size_t bytes_of(const PixelPatches& p) { return p.values.size() * sizeof(float); }

}  // namespace

std::optional<PixelPatches> PatchCache::find(const ImageDigest& digest) {
  std::lock_guard lock(mu_);
  const auto it = index_.find(digest.bytes);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void PatchCache::insert(const ImageDigest& digest, const PixelPatches& patches) {
  const size_t need = bytes_of(patches);
  std::lock_guard lock(mu_);
  if (const auto it = index_.find(digest.bytes); it != index_.end()) {
    bytes_ -= bytes_of(it->second->second);
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (need > max_bytes_) return;
  while (bytes_ + need > max_bytes_) {
    bytes_ -= bytes_of(lru_.back().second);
    index_.erase(lru_.back().first.bytes);
    lru_.pop_back();
  }
  lru_.emplace_front(digest, patches);
  index_[digest.bytes] = lru_.begin();
  bytes_ += need;
}

size_t PatchCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t PatchCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace rocket
