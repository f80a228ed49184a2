// weights.blob opened for the fuel step's bulk reads: 64 KiB-aligned offsets and lengths
// (docs/doctrine.md, the alignment quantum), through O_DIRECT where the file system allows it, so a blob of tens of GB
// streams from disk to the staging buffers without a second copy through the page cache.
//
// Thread-safe: read() is a pread on one descriptor, so every reader thread of a load shares one
// BlobFile. No CUDA here: the file half of the loader is tested on CPU (tests/weight_loader_test.cc).
#pragma once

#include <cstdint>
#include <string>

namespace rocket {

enum class ReadMode {
  kDirect,    // O_DIRECT: bypasses the page cache (a cold disk, or a blob larger than spare RAM)
  kBuffered,  // through the page cache: fastest when the blob was just written or read
};

class BlobFile {
 public:
  // Opens `path` and verifies it holds exactly `expected_bytes` (the plan's blob_bytes). kDirect falls
  // back to buffered reads, and says so on stderr, only when open(O_DIRECT) fails with EINVAL: that is
  // how a file system without direct I/O answers; any other failure is an Error naming the path.
  // REQUIRES: expected_bytes is a multiple of 64 KiB (the plan aligns the blob).
  BlobFile(const std::string& path, uint64_t expected_bytes, ReadMode mode);
  ~BlobFile();
  BlobFile(const BlobFile&) = delete;
  BlobFile& operator=(const BlobFile&) = delete;

  // Reads exactly `bytes` at `offset` into `dst`, continuing after partial transfers. End of file
  // before `bytes` (the file shrank after it was opened) and I/O errors are Errors naming the file
  // and the offset.
  // REQUIRES: offset and bytes are multiples of 64 KiB, offset + bytes <= size(), and dst is aligned to
  // 4 KiB (what O_DIRECT asks of the memory it transfers into).
  void read(uint64_t offset, uint64_t bytes, void* dst) const;

  bool direct() const { return direct_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool direct_ = false;
};

}  // namespace rocket
