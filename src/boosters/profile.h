// A hardware profile: what one booster of a machine offers, measured there by `rocket probe` and
// stored as JSON under boosters/. The compiler reads it to size a plan (memory map, tiles, roofline);
// upright measures free memory again and refuses to start when the plan's residency exceeds
// usable_bytes() (docs/doctrine.md, "Memory budget": never a fraction of total memory).
//
// Fields a booster kind has no use for are 0 or empty (host: sm_count, smem_per_block_optin,
// compute_capability, driver_version, runtime_version). cores, page_size and host describe the CPU
// the booster is attached to, for both kinds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "kernels/tiling/booster.h"

namespace rocket {

constexpr int kProfileSchema = 1;  // bumped whenever a field changes meaning; load refuses others

constexpr uint64_t kGiB = uint64_t(1) << 30;
constexpr uint64_t kMiB = uint64_t(1) << 20;

// NOTE: host memory is shared with the OS, the page cache and every other process; 2 GiB keeps the
// machine responsive (and out of the OOM killer's reach) while the engine holds the rest.
constexpr uint64_t kHostFloor = 2 * kGiB;
// NOTE: the driver grows its own allocations after startup (CUDA graph instantiation, module
// loading, lazy kernel loading, printf/heap buffers); 1 GiB is headroom for that growth, which the
// startup probe cannot see.
constexpr uint64_t kH200Floor = 1 * kGiB;
// Workspace the H200 engine allocates outside its arena and holds for its lifetime (GEMM split-K
// and reduction scratch); the probe allocates exactly this to measure the reserve.
constexpr uint64_t kH200Workspace = 256 * kMiB;

struct HardwareProfile {
  int schema = kProfileSchema;
  std::string booster;             // "host" | "h200"
  std::string device_name;         // CPU model name, or the CUDA device name
  std::string compute_capability;  // "9.0" for h200
  int sm_count = 0;
  uint64_t l2_bytes = 0;              // h200: device L2; host: per-core L2
  uint64_t smem_per_block_optin = 0;  // shared memory per block with opt-in (cudaFuncSetAttribute)
  uint64_t memory_total = 0;
  uint64_t memory_free = 0;  // measured after context creation (h200) / MemAvailable (host)
  uint64_t reserve = 0;      // probed: what the engine holds outside its arena
  uint64_t floor = 0;        // headroom never handed to the arena (kHostFloor / kH200Floor)
  double copy_gbps = 0;      // measured copy bandwidth, read+write bytes per second / 1e9
  int cores = 0;             // hardware threads this process may run on
  uint64_t page_size = 0;    // host page size in bytes
  std::string driver_version;   // CUDA driver API version, "13.0"
  std::string runtime_version;  // CUDA runtime the probe was linked against
  std::string measured_at;      // ISO 8601 UTC, "2025-06-01T12:00:00Z"
  std::string host;             // host name of the machine that was measured

  // memory_free − reserve − floor, or 0 when reserve + floor already exceed what is free (the engine
  // then refuses to start).
  uint64_t usable_bytes() const;
};

// What kernel tiling reads of a profile (kernels/tiling/booster.h).
tiling::BoosterLimits booster_limits(const HardwareProfile& p);

void to_json(nlohmann::json& j, const HardwareProfile& p);
// Throws Error naming the field that is missing, has the wrong type, or holds an impossible value.
void from_json(const nlohmann::json& j, HardwareProfile& p);

// Errors name the file (and the field, when one is at fault).
HardwareProfile load_profile(const std::filesystem::path& path);
// Writes atomically: a temporary file next to `path`, flushed, then renamed over it.
void save_profile(const HardwareProfile& p, const std::filesystem::path& path);

// A readable multi-line summary, as `rocket probe` prints it.
std::string describe_profile(const HardwareProfile& p);

// Copy size the host probe times: far beyond any per-core L2 and most last-level caches, so it
// measures memory, not cache.
constexpr uint64_t kHostCopyBytes = kGiB;

// Measures the CPU of this machine as a host booster by timing a copy of `copy_bytes` (it allocates
// twice that). REQUIRES: copy_bytes is a positive multiple of 64 KiB.
// NOTE: first-touch page faults dominate its run time, not the copy: about 1 s for the default size
// on a bare machine, but up to 10 s per GiB touched on VMs whose hypervisor backs guest memory lazily
// The memory half of probe_host, without the bandwidth measurement (copy_gbps = 0): what upright
// measures at every launch to check the plan still fits.
HardwareProfile probe_host_memory();

// (the CI machine is one). Tests pass a smaller size; `rocket probe` uses the default.
HardwareProfile probe_host(uint64_t copy_bytes = kHostCopyBytes);

// Whether this build compiled the CUDA sources (nvcc was found at configure time). rocket_lib sees
// ROCKET_HAVE_CUDA through its PUBLIC link to rocket_cuda, which exists exactly when nvcc does.
bool cuda_compiled_in();

#ifdef ROCKET_HAVE_CUDA
// Measures CUDA device `device` as an h200 booster (defined in probe_h200.cu). Throws Error
// "no CUDA device: <reason>" when there is no usable device, and refuses devices that are not
// compute capability 9.0 (the sm_90a target). Allocates about 4.3 GiB on the device while it runs.
HardwareProfile probe_h200(int device = 0);
// The names of the CUDA devices this process sees (CUDA_VISIBLE_DEVICES honoured), in device order,
// without creating a context; empty when there is none, with the runtime's reason in *why.
std::vector<std::string> visible_cuda_devices(std::string* why);
#endif

// `rocket probe` (args exclude the subcommand): --booster host|h200 [--out FILE] | --help.
// Prints the profile; with --out also writes its JSON atomically. Returns 0 on success, 1 on a failed
// probe or write, 2 on bad usage.
int probe_main(const std::vector<std::string>& args);

}  // namespace rocket
