// probe_h200: measures one CUDA device as an h200 booster. See profile.h for what each field means.
//
// Order matters for the memory budget: free memory is read right after context creation, before
// anything else is allocated; the reserve is the drop in free memory caused by what the engine holds
// outside its arena (streams, an event, the workspace); the bandwidth buffers come after both.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "boosters/machine.h"
#include "boosters/profile.h"
#include "core/align.h"
#include "core/error.h"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/cuda_handles.h"

namespace rocket {

namespace {

constexpr uint64_t kCopyBytes = 2 * kGiB;
constexpr int kCopyRuns = 5;  // after one warm-up copy; the best run is kept

// fmt is not available in CUDA translation units (error.h): messages are composed with std::string.
std::string str(int v) { return std::to_string(v); }

std::string cuda_version_text(int v) { return str(v / 1000) + "." + str((v % 1000) / 10); }

uint64_t free_device_memory() {
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

// Device-to-device copy bandwidth between two buffers of kCopyBytes, read+write bytes per second / 1e9.
double device_copy_gbps(cudaStream_t stream) {
  DeviceMemory src(kCopyBytes), dst(kCopyBytes);
  CUDA_CHECK(cudaMemsetAsync(src.get(), 0x5a, kCopyBytes, stream));
  return copy_gbps(dst.get(), src.get(), kCopyBytes, stream, kCopyRuns);
}

}  // namespace

std::vector<std::string> visible_cuda_devices(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    *why = cudaGetErrorString(err);
    return {};
  }
  std::vector<std::string> names;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (const cudaError_t e = cudaGetDeviceProperties(&prop, d); e != cudaSuccess) {
      *why = "device " + str(d) + ": " + cudaGetErrorString(e);
      return {};
    }
    names.push_back(prop.name);
  }
  if (names.empty()) *why = "no CUDA device present";
  return names;
}

HardwareProfile probe_h200(int device) {
  // Failures before a context exists mean there is no usable device: report them as such, not as an
  // internal CUDA error with a file and line.
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) throw Error(std::string("no CUDA device: ") + cudaGetErrorString(err));
  if (device < 0 || device >= count)
    throw Error("no CUDA device: device " + str(device) + " requested, " + str(count) + " present");
  err = cudaSetDevice(device);
  if (err == cudaSuccess) err = cudaFree(0);  // creates the primary context
  if (err != cudaSuccess)
    throw Error("no CUDA device: cannot create a context on device " + str(device) + ": " + cudaGetErrorString(err));

  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  // NOTE: the h200 engine is compiled for sm_90a only; any other architecture cannot run it.
  if (prop.major != 9 || prop.minor != 0)
    throw Error("booster h200 needs compute capability 9.0 (sm_90a); device " + str(device) + " (" + prop.name +
                ") is " + str(prop.major) + "." + str(prop.minor));

  HardwareProfile p;
  p.booster = "h200";
  p.device_name = prop.name;
  p.compute_capability = str(prop.major) + "." + str(prop.minor);
  p.sm_count = prop.multiProcessorCount;
  p.l2_bytes = uint64_t(prop.l2CacheSize);
  p.smem_per_block_optin = uint64_t(prop.sharedMemPerBlockOptin);
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  p.memory_free = free;
  p.memory_total = total;

  {
    // What the engine holds outside its arena, created the way the engine creates it: a compute
    // stream, a copy stream, one event and the workspace. cudaMemGetInfo moves in 2 MiB pages; the
    // difference is rounded up to the 64 KiB quantum.
    Stream compute, copy;
    Event done;
    DeviceMemory workspace(kH200Workspace);
    CUDA_CHECK(cudaDeviceSynchronize());
    const uint64_t after = free_device_memory();
    const uint64_t drop = p.memory_free > after ? p.memory_free - after : 0;
    // NOTE: on a shared GPU another process freeing memory meanwhile can shrink the measured drop; the
    // engine holds at least its workspace whatever the measurement says.
    p.reserve = align_up(std::max(drop, kH200Workspace));
    p.copy_gbps = device_copy_gbps(compute.get());
  }
  p.floor = kH200Floor;

  int driver = 0, runtime = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  p.driver_version = cuda_version_text(driver);
  p.runtime_version = cuda_version_text(runtime);
  stamp_machine(p);
  return p;
}

}  // namespace rocket
