// SnapshotStore: the bytes of the recurrent-state snapshot slots, over memory someone else owns
// (the engine's arena region, or a test's buffer). Slot s is [s × slot_bytes, (s + 1) × slot_bytes).
// Which slots are in use, and by whom, is the cache's business (RadixCache::snapshots()); this
// class only moves bytes, so that capture and restore are the same code in the host engine and in
// tests.
//
// Thread safety: none; the engine loop thread owns it. Copy is deleted: it aliases the memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rocket {

class SnapshotStore {
 public:
  // REQUIRES: memory.size() >= slots × slot_bytes; slots > 0; slot_bytes > 0.
  SnapshotStore(std::span<std::byte> memory, int slots, uint64_t slot_bytes);
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;

  int slots() const { return slots_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint64_t offset(int slot) const;  // REQUIRES: 0 <= slot < slots()
  std::span<std::byte> slot(int slot);
  std::span<const std::byte> slot(int slot) const;

  // Capture: copies a stream's state (conv + recurrent, SnapshotLayout order) into `slot`.
  // REQUIRES: state.size() <= slot_bytes().
  void capture(int slot, std::span<const std::byte> state);
  // Restore: copies the first state.size() bytes of `slot` back into a stream's state.
  // REQUIRES: state.size() <= slot_bytes().
  void restore(int slot, std::span<std::byte> state) const;

 private:
  std::span<std::byte> memory_;
  int slots_;
  uint64_t slot_bytes_;
};

}  // namespace rocket
