// The H200 engine's one device allocation. The plan lays every byte the engine touches on the device
// into one address space (src/plan/plan.h): the weight blob at [0, blob_bytes), then activations, logits,
// KV pages, recurrent state and snapshots at literal 64 KiB-aligned offsets. The arena is a single
// cudaMalloc of the plan's arena_bytes made at upright; every buffer is base + plan offset, and nothing
// is allocated on the device after startup (docs/doctrine.md: no dynamic allocator).
//
// Thread safety: immutable after construction; accessors may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace rocket {

class Arena {
 public:
  // One cudaMalloc of `arena_bytes` on the current device, filled with 0xff so that a buffer read
  // before it is written shows up as NaN (bf16 and fp32 alike), never as plausible zeros. Error when the
  // allocation fails.
  // REQUIRES: the memory budget admitted arena_bytes (MemoryBudget::admit); arena_bytes > 0.
  explicit Arena(uint64_t arena_bytes);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  uint64_t bytes() const { return bytes_; }
  std::byte* base() const { return base_; }

  // `count` elements of T at plan offset `offset`, as a device pointer. Upright has already matched
  // the plan against the engine's compiled memory map, so an offset outside the arena or misaligned for
  // T is a programming error (CHECK), not a user error.
  template <typename T>
  T* at(uint64_t offset, uint64_t count = 1) const {
    CHECK(offset % alignof(T) == 0, "arena offset misaligned for its element type");
    CHECK(offset <= bytes_ && count <= (bytes_ - offset) / sizeof(T), "arena access beyond the plan's arena");
    return reinterpret_cast<T*>(base_ + offset);
  }

 private:
  std::byte* base_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace rocket
