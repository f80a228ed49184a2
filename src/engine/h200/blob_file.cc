#include "engine/h200/blob_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/align.h"
#include "core/error.h"

namespace rocket {

namespace {

constexpr uint64_t kDirectMemoryAlign = 4096;

}  // namespace

BlobFile::BlobFile(const std::string& path, uint64_t expected_bytes, ReadMode mode) : path_(path) {
  CHECK(is_aligned(expected_bytes), "the plan's blob size must be a multiple of 64 KiB");
  if (mode == ReadMode::kDirect) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    direct_ = fd_ >= 0;
    if (fd_ < 0 && errno != EINVAL) fail("fuel: {}: cannot open: {}", path, std::strerror(errno));
    if (fd_ < 0)
      std::fprintf(stderr, "[fuel] %s: the file system refuses O_DIRECT; reading through the page cache\n",
                   path.c_str());
  }
  if (fd_ < 0) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("fuel: {}: cannot open: {}", path, std::strerror(errno));
  }
  struct stat st{};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail("fuel: {}: cannot stat: {}", path, std::strerror(err));
  }
  size_ = uint64_t(st.st_size);
  if (size_ != expected_bytes) {
    ::close(fd_);
    fail("fuel: {} is {} bytes, the plan says {}", path, size_, expected_bytes);
  }
}

BlobFile::~BlobFile() { ::close(fd_); }

void BlobFile::read(uint64_t offset, uint64_t bytes, void* dst) const {
  CHECK(is_aligned(offset) && is_aligned(bytes) && offset + bytes <= size_, "blob reads are whole 64 KiB units");
  CHECK(reinterpret_cast<uintptr_t>(dst) % kDirectMemoryAlign == 0, "staging memory must be 4 KiB aligned");
  auto* out = static_cast<char*>(dst);
  uint64_t done = 0;
  // NOTE: pread may return fewer bytes than asked without an error (a signal, a network file system);
  // only a return of 0 means end of file.
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, bytes - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      fail("fuel: {}: read of {} bytes at offset {} failed: {}", path_, bytes - done, offset + done,
           std::strerror(errno));
    if (n == 0)
      fail("fuel: {}: short read at offset {}: end of file after {} of {} bytes (the file was {} bytes when "
           "opened; did it shrink while loading?)",
           path_, offset + done, done, bytes, size_);
    done += uint64_t(n);
  }
}

}  // namespace rocket
