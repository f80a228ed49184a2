#include "cache/page_pool.h"

#include <fmt/format.h>

#include "core/error.h"

namespace rocket {

PagePool::PagePool(int size) : refs_(size > 0 ? size : 0, 0) {
  CHECK(size > 0, "a pool needs at least one index");
  free_.reserve(size);
  for (int i = size - 1; i >= 0; --i) free_.push_back(i);
}

std::optional<int> PagePool::alloc() {
  if (free_.empty()) return std::nullopt;
  const int i = free_.back();
  free_.pop_back();
  refs_[i] = 1;
  return i;
}

void PagePool::retain(int i) {
  CHECK(i >= 0 && i < size() && refs_[i] >= 1, "retain of a free or out-of-range index");
  ++refs_[i];
}

bool PagePool::release(int i) {
  CHECK(i >= 0 && i < size() && refs_[i] >= 1, "release of a free or out-of-range index");
  if (--refs_[i] > 0) return false;
  free_.push_back(i);
  return true;
}

int PagePool::refcount(int i) const {
  CHECK(i >= 0 && i < size(), "index out of range");
  return refs_[i];
}

std::string PagePool::audit() const {
  std::vector<uint8_t> in_free(refs_.size(), 0);
  for (int32_t i : free_) {
    if (i < 0 || i >= size()) return fmt::format("free list holds out-of-range index {}", i);
    if (in_free[i]) return fmt::format("index {} is in the free list twice", i);
    in_free[i] = 1;
    if (refs_[i] != 0) return fmt::format("index {} is in the free list with refcount {}", i, refs_[i]);
  }
  for (int i = 0; i < size(); ++i) {
    if (refs_[i] < 0) return fmt::format("index {} has negative refcount {}", i, refs_[i]);
    if (refs_[i] == 0 && !in_free[i]) return fmt::format("index {} has refcount 0 but is not free (leaked)", i);
  }
  return {};
}

void PagePool::check_invariants() const {
  const std::string broken = audit();
  CHECK(broken.empty(), broken);
}

}  // namespace rocket
