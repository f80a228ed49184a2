#include "engine/h200/weight_loader.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/align.h"
#include "core/error.h"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/cuda_handles.h"

namespace rocket {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One reader thread's resources: two staging buffers, the event recorded after each one's latest copy,
// and the stream the copies run on.
struct Reader {
  explicit Reader(uint64_t chunk_bytes) : staging{PinnedBuffer(chunk_bytes), PinnedBuffer(chunk_bytes)} {}
  // A reader that stopped on an error may still have copies in flight out of its staging buffers:
  // they finish before the buffers are freed.
  ~Reader() { report_release(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize"); }
  PinnedBuffer staging[2];
  Event copied[2];
  Stream stream;
};

// Reads the blob in chunks through opt.readers threads; copies each chunk to device + offset unless
// `device` is null (the raw read measurement).
LoadReport transfer(const std::string& path, uint64_t blob_bytes, std::byte* device, const LoadOptions& opt) {
  CHECK(blob_bytes > 0, "a plan's blob holds at least one weight");
  CHECK(opt.readers >= 1, "a load needs at least one reader thread");
  CHECK(opt.chunk_bytes > 0 && is_aligned(opt.chunk_bytes), "staging chunks are whole 64 KiB units");
  const auto t0 = Clock::now();
  const BlobFile file(path, blob_bytes, opt.mode);
  int cuda_device = 0;
  CUDA_CHECK(cudaGetDevice(&cuda_device));
  const uint64_t chunk = std::min(opt.chunk_bytes, blob_bytes);
  std::vector<std::unique_ptr<Reader>> readers;
  for (int r = 0; r < opt.readers; ++r) readers.push_back(std::make_unique<Reader>(chunk));
  const double setup_seconds = seconds_since(t0);

  const uint64_t chunks = (blob_bytes + chunk - 1) / chunk;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto work = [&](Reader& r) {
    try {
      // The current device is per thread; copies must target the caller's device.
      CUDA_CHECK(cudaSetDevice(cuda_device));
      for (uint64_t k = 0; !stop.load(std::memory_order_relaxed); ++k) {
        const uint64_t i = next.fetch_add(1, std::memory_order_relaxed);
        if (i >= chunks) break;
        const int b = int(k % 2);
        // The copy out of this buffer two chunks ago must be done before the buffer is refilled; until a
        // buffer's first copy the event was never recorded and this returns at once.
        CUDA_CHECK(cudaEventSynchronize(r.copied[b].get()));
        const uint64_t offset = i * chunk, bytes = std::min(chunk, blob_bytes - offset);
        file.read(offset, bytes, r.staging[b].get());
        if (device == nullptr) continue;
        CUDA_CHECK(cudaMemcpyAsync(device + offset, r.staging[b].get(), bytes, cudaMemcpyHostToDevice,
                                   r.stream.get()));
        CUDA_CHECK(cudaEventRecord(r.copied[b].get(), r.stream.get()));
      }
      CUDA_CHECK(cudaStreamSynchronize(r.stream.get()));
    } catch (...) {
      const std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      stop = true;
    }
  };
  {
    std::vector<std::jthread> threads;
    for (auto& r : readers) threads.emplace_back(work, std::ref(*r));
  }
  if (error) std::rethrow_exception(error);
  return LoadReport{.bytes = blob_bytes,
                    .seconds = seconds_since(t0),
                    .setup_seconds = setup_seconds,
                    .direct = file.direct(),
                    .readers = opt.readers};
}

}  // namespace

LoadReport load_weights(const std::string& path, uint64_t blob_bytes, const Arena& arena, const LoadOptions& opt) {
  CHECK(blob_bytes <= arena.bytes(), "the weight blob must fit the arena");
  return transfer(path, blob_bytes, arena.base(), opt);
}

LoadReport read_weights(const std::string& path, uint64_t blob_bytes, const LoadOptions& opt) {
  return transfer(path, blob_bytes, nullptr, opt);
}

}  // namespace rocket
