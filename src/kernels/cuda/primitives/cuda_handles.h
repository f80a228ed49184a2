// The CUDA runtime objects the host side holds, each owned by one RAII handle, and the timing built
// on them: every stream, event, device allocation, pinned host buffer, cuBLAS handle and graph of the
// engines, the probe and the GPU checks comes from here, so each is created with CUDA_CHECK and
// released once (the H200 engine's arena is the one exception: engine/h200/arena.h, with its own
// refusal message).
// Header-only: rocket_cuda links after rocket_lib, so its objects cannot depend on rocket_lib's.
//
// Release runs on the error path too (an Error unwinding), where throwing is not an option: a failed
// release is reported on stderr rather than dropped.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/cuda/primitives/cublas_check.h"
#include "kernels/cuda/primitives/cuda_check.h"

namespace rocket {

inline void report_release(cudaError_t err, const char* what) {
  if (err != cudaSuccess) std::fprintf(stderr, "[cuda] %s failed: %s\n", what, cudaGetErrorString(err));
}

class Stream {
 public:
  explicit Stream(unsigned flags = cudaStreamNonBlocking) { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, flags)); }
  ~Stream() { report_release(cudaStreamDestroy(stream_), "cudaStreamDestroy"); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Movable, so a vector can hold a graph's events; a moved-from Event holds none.
class Event {
 public:
  // cudaEventDisableTiming unless the event is an end of a timed interval (elapsed_ms).
  explicit Event(unsigned flags = cudaEventDisableTiming) { CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags)); }
  ~Event() {
    if (event_) report_release(cudaEventDestroy(event_), "cudaEventDestroy");
  }
  Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    std::swap(event_, o.event_);
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Untyped device memory, uninitialised (tests/cuda/check_support.h has the typed, poisoned buffer).
class DeviceMemory {
 public:
  explicit DeviceMemory(uint64_t bytes) : bytes_(bytes) { CUDA_CHECK(cudaMalloc(&ptr_, bytes)); }
  ~DeviceMemory() { report_release(cudaFree(ptr_), "cudaFree"); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return ptr_; }
  uint64_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

// Page-aligned anonymous memory, pinned with cudaHostRegister so copies out of it are DMA.
// NOTE: not cudaHostAlloc: the driver maps that memory into the process itself, and direct I/O, which
// pins the user pages it transfers into, is refused (EFAULT) on such mappings on some platforms;
// ordinary anonymous pages serve both O_DIRECT reads and the device copy.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(uint64_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw Error("cannot map " + std::to_string(bytes) + " bytes of staging memory: " + std::strerror(errno));
    ptr_ = p;
    const cudaError_t err = cudaHostRegister(ptr_, bytes, cudaHostRegisterDefault);
    if (err != cudaSuccess) ::munmap(ptr_, bytes_);  // no destructor runs for a constructor that throws
    cuda_check(err, "cudaHostRegister(staging)", __FILE__, __LINE__);
  }
  ~PinnedBuffer() {
    report_release(cudaHostUnregister(ptr_), "cudaHostUnregister");
    ::munmap(ptr_, bytes_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

// `count` T of page-locked host memory from cudaHostAlloc: with cudaHostAllocMapped, kernels read and
// write it through its own address (unified addressing), so a step's inputs and outputs need no copy.
// T may be incomplete where the handle is declared; it is complete where the handle is made.
template <typename T>
class HostMemory {
 public:
  HostMemory(size_t count, unsigned flags) {
    void* p = nullptr;
    CUDA_CHECK(cudaHostAlloc(&p, sizeof(T) * count, flags));
    ptr_ = static_cast<T*>(p);
  }
  ~HostMemory() { report_release(cudaFreeHost(ptr_), "cudaFreeHost"); }
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  T* get() const { return ptr_; }
  T* operator->() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

// A cuBLAS handle whose work is ordered on `stream`. cuBLAS allocates its own device memory in
// cublasCreate, so create it before a memory budget is measured.
class Cublas {
 public:
  explicit Cublas(cudaStream_t stream) {
    CUBLAS_CHECK(cublasCreate(&handle_));
    const cublasStatus_t set = cublasSetStream(handle_, stream);
    if (set != CUBLAS_STATUS_SUCCESS) cublasDestroy(handle_);  // no destructor runs for a constructor that throws
    CUBLAS_CHECK(set);
  }
  ~Cublas() {
    if (cublasDestroy(handle_) != CUBLAS_STATUS_SUCCESS) std::fprintf(stderr, "[cuda] cublasDestroy failed\n");
  }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// An instantiated CUDA graph (capture_graph makes one). Movable, so a table can hold them; a
// moved-from GraphExec holds none.
class GraphExec {
 public:
  GraphExec() = default;  // none yet: assigned a captured one later
  explicit GraphExec(cudaGraph_t graph) { CUDA_CHECK(cudaGraphInstantiate(&exec_, graph, 0)); }
  ~GraphExec() {
    if (exec_) report_release(cudaGraphExecDestroy(exec_), "cudaGraphExecDestroy");
  }
  GraphExec(GraphExec&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&& o) noexcept {
    std::swap(exec_, o.exec_);
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

// The work `enqueue()` puts on `stream`, captured (thread-local mode) and instantiated. A throw inside
// `enqueue` ends the capture and drops its graph before it propagates, so the stream is left usable.
template <typename Enqueue>
GraphExec capture_graph(cudaStream_t stream, Enqueue&& enqueue) {
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  struct Drop {
    cudaGraph_t g;
    ~Drop() { report_release(cudaGraphDestroy(g), "cudaGraphDestroy"); }
  } drop{graph};
  return GraphExec(graph);
}

// Milliseconds the work `enqueue()` puts on `stream` takes, between two events; waits for it.
template <typename Enqueue>
float elapsed_ms(cudaStream_t stream, Enqueue&& enqueue) {
  const Event start(cudaEventDefault), stop(cudaEventDefault);
  CUDA_CHECK(cudaEventRecord(start.get(), stream));
  enqueue();
  CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms;
}

// The device copy rate, the roofline's denominator: read + write bytes per second / 1e9 of one
// cudaMemcpyAsync of `bytes` from src to dst, the best of `runs` after one warm-up copy.
inline double copy_gbps(void* dst, const void* src, uint64_t bytes, cudaStream_t stream, int runs) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  float best_ms = 1e30f;
  for (int run = 0; run < runs; ++run)
    best_ms = std::min(best_ms, elapsed_ms(stream, [&] {
                         CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
                       }));
  CHECK(best_ms > 0, "device copy timed at zero milliseconds");
  return 2.0 * double(bytes) / (double(best_ms) * 1e-3) / 1e9;
}

}  // namespace rocket
