#include "cache/snapshot_store.h"

#include <cstring>

#include "core/error.h"

namespace rocket {

SnapshotStore::SnapshotStore(std::span<std::byte> memory, int slots, uint64_t slot_bytes)
    : memory_(memory), slots_(slots), slot_bytes_(slot_bytes) {
  CHECK(slots > 0 && slot_bytes > 0, "a snapshot store needs slots of positive size");
  CHECK(memory.size() >= uint64_t(slots) * slot_bytes, "snapshot memory smaller than slots × slot bytes");
}

uint64_t SnapshotStore::offset(int s) const {
  CHECK(s >= 0 && s < slots_, "snapshot slot out of range");
  return uint64_t(s) * slot_bytes_;
}

std::span<std::byte> SnapshotStore::slot(int s) { return memory_.subspan(offset(s), slot_bytes_); }

std::span<const std::byte> SnapshotStore::slot(int s) const { return memory_.subspan(offset(s), slot_bytes_); }

void SnapshotStore::capture(int s, std::span<const std::byte> state) {
  CHECK(state.size() <= slot_bytes_, "state larger than a snapshot slot");
  std::memcpy(slot(s).data(), state.data(), state.size());
}

void SnapshotStore::restore(int s, std::span<std::byte> state) const {
  CHECK(state.size() <= slot_bytes_, "state larger than a snapshot slot");
  std::memcpy(state.data(), slot(s).data(), state.size());
}

}  // namespace rocket
