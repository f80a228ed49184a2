#include "compiler/condition.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/progress.h"

namespace rocket {

void condition_weights(const Fuel& fuel, const Plan& plan, const std::string& blob_path) {
  int fd = ::open(blob_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", blob_path, std::strerror(errno));
  auto close_and_fail = [&](const std::string& what) {
    ::close(fd);
    fail("{}: {}: {}", blob_path, what, std::strerror(errno));
  };
  // Sparse-extend to the full size first: the padding between units reads as zeros.
  if (::ftruncate(fd, off_t(plan.blob_bytes)) != 0) close_and_fail("cannot size the blob");
  Progress progress("condition weights", plan.blob_bytes);
  for (const PlanTensor& t : plan.tensors) {
    TensorView v = fuel.tensor(t.name);
    CHECK(v.nbytes == t.bytes, t.name);
    uint64_t done = 0;
    while (done < t.bytes) {
      ssize_t w = ::pwrite(fd, v.data + done, std::min<uint64_t>(t.bytes - done, 1u << 30), off_t(t.offset + done));
      if (w <= 0) close_and_fail("write of " + t.name + " failed");
      done += uint64_t(w);
    }
    progress.advance(t.bytes);
  }
  if (::fsync(fd) != 0) close_and_fail("fsync failed");
  if (::close(fd) != 0) fail("{}: close failed: {}", blob_path, std::strerror(errno));
  progress.finish();
}

}  // namespace rocket
