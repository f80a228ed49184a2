// The fuel step of the H200 countdown: weights.blob → arena [0, blob_bytes).
//
// Reader threads take 64 KiB-aligned chunks in file order from a shared counter and pread each into a
// pinned staging buffer (page-aligned, registered with cudaHostRegister). Every reader owns two buffers
// and one copy stream, so it reads its next chunk from disk while cudaMemcpyAsync moves the previous one
// to the device; before refilling a buffer it waits on the event recorded after that buffer's last copy.
// More than one reader is for when one thread cannot keep up with the disk or the page cache
// (weight_load_check measures 1, 2 and 4).
//
// The staging buffers, streams and events live only for the duration of a load: they are host memory
// and driver handles, not device memory the budget must hold.
#pragma once

#include <cstdint>
#include <string>

#include "boosters/profile.h"
#include "engine/h200/arena.h"
#include "engine/h200/blob_file.h"

namespace rocket {

struct LoadOptions {
  ReadMode mode = ReadMode::kDirect;
  int readers = 2;                   // threads, each with two staging buffers and a copy stream
  uint64_t chunk_bytes = 64 * kMiB;  // one staging buffer; a multiple of 64 KiB
};

struct LoadReport {
  uint64_t bytes = 0;
  double seconds = 0;          // the whole call: open, staging allocation, reads, copies, final sync
  double setup_seconds = 0;    // of which: allocating the pinned staging buffers and streams
  bool direct = false;         // O_DIRECT was in effect (false also when the file system refused it)
  int readers = 0;
  double gbps() const { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0; }
};

// Loads `path`, which must hold exactly `blob_bytes` (the plan's), into arena [0, blob_bytes) on the
// current device, and returns when every byte is on the device. Errors name the file (and the offset,
// for a short read or an I/O error).
// REQUIRES: blob_bytes <= arena.bytes(); opt.readers >= 1.
LoadReport load_weights(const std::string& path, uint64_t blob_bytes, const Arena& arena, const LoadOptions& opt);

// The same reads, through the same threads into the same kind of staging buffers, without the device
// copy: the raw read rate a load is compared against.
LoadReport read_weights(const std::string& path, uint64_t blob_bytes, const LoadOptions& opt);

}  // namespace rocket
