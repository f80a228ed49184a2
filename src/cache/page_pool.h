// PagePool: a fixed set of refcounted indices [0, size). The cache keeps two: KV pages and
// recurrent-state snapshot slots. It holds indices only; the bytes live in the engine's arena.
//
// Thread safety: none. The engine loop thread owns the pool (and the cache around it).
//
// Invariants (audit()):
//  - every index is either free (refcount 0, in the free list exactly once) or in use
//    (refcount >= 1, not in the free list);
//  - free_count() is the free list's length.
// Exhaustion is a value (alloc() returns nullopt), never a crash: the caller evicts or waits.
// Misuse (retaining or releasing a free index) is a programming error and CHECK-fails.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rocket {

class PagePool {
 public:
  explicit PagePool(int size);  // REQUIRES: size > 0
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // A free index with refcount 1, lowest-numbered first on a fresh pool, most recently freed first
  // after that; nullopt when every index is in use.
  std::optional<int> alloc();
  // REQUIRES: refcount(i) >= 1.
  void retain(int i);
  // Drops one reference. Returns true when that was the last and i is free again.
  // REQUIRES: refcount(i) >= 1.
  bool release(int i);

  int refcount(int i) const;  // REQUIRES: 0 <= i < size()
  int size() const { return int(refs_.size()); }
  int free_count() const { return int(free_.size()); }
  int used_count() const { return size() - free_count(); }

  // The first broken invariant, described; empty when all hold. O(size).
  std::string audit() const;
  void check_invariants() const;  // CHECK-fails on audit()

 private:
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;  // a stack: alloc pops the back
};

}  // namespace rocket
