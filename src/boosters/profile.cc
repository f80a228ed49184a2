#include "boosters/profile.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "boosters/machine.h"
#include "boosters/memory_budget.h"
#include "core/align.h"
#include "core/cli.h"
#include "core/error.h"

namespace rocket {

using nlohmann::json;

uint64_t HardwareProfile::usable_bytes() const {
  return MemoryBudget{.free = memory_free, .reserve = reserve, .floor = floor}.usable();
}

// ---------------------------------------------------------------------------------------------
// JSON

tiling::BoosterLimits booster_limits(const HardwareProfile& p) {
  return {p.sm_count, int(p.smem_per_block_optin), p.l2_bytes};
}

void to_json(json& j, const HardwareProfile& p) {
  j = json{{"schema", p.schema},
           {"booster", p.booster},
           {"device_name", p.device_name},
           {"compute_capability", p.compute_capability},
           {"sm_count", p.sm_count},
           {"l2_bytes", p.l2_bytes},
           {"smem_per_block_optin", p.smem_per_block_optin},
           {"memory_total", p.memory_total},
           {"memory_free", p.memory_free},
           {"reserve", p.reserve},
           {"floor", p.floor},
           {"copy_gbps", p.copy_gbps},
           {"cores", p.cores},
           {"page_size", p.page_size},
           {"driver_version", p.driver_version},
           {"runtime_version", p.runtime_version},
           {"measured_at", p.measured_at},
           {"host", p.host}};
}

namespace {

template <typename T>
T field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) fail("missing field '{}'", key);
  const json& v = *it;
  if constexpr (std::is_same_v<T, std::string>) {
    if (v.is_string()) return v.get<std::string>();
    fail("field '{}' must be a string, found {}", key, v.dump());
  } else if constexpr (std::is_same_v<T, double>) {
    if (v.is_number()) return v.get<double>();
    fail("field '{}' must be a number, found {}", key, v.dump());
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    // nlohmann stores every non-negative integer literal as unsigned; a negative one is refused here
    // rather than wrapped around.
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    fail("field '{}' must be a non-negative integer, found {}", key, v.dump());
  } else {
    static_assert(std::is_same_v<T, int>);
    if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX) return v.get<int>();
    fail("field '{}' must be a non-negative 32-bit integer, found {}", key, v.dump());
  }
}

}  // namespace

void from_json(const json& j, HardwareProfile& p) {
  if (!j.is_object()) fail("a hardware profile must be a JSON object, found {}", j.type_name());
  HardwareProfile r;
  r.schema = field<int>(j, "schema");
  if (r.schema != kProfileSchema)
    fail("field 'schema': version {} is not supported (this build reads {}); run `rocket probe` again", r.schema,
         kProfileSchema);
  r.booster = field<std::string>(j, "booster");
  if (r.booster != "host" && r.booster != "h200")
    fail("field 'booster': '{}' is not a booster kind (expected host or h200)", r.booster);
  r.device_name = field<std::string>(j, "device_name");
  r.compute_capability = field<std::string>(j, "compute_capability");
  r.sm_count = field<int>(j, "sm_count");
  r.l2_bytes = field<uint64_t>(j, "l2_bytes");
  r.smem_per_block_optin = field<uint64_t>(j, "smem_per_block_optin");
  r.memory_total = field<uint64_t>(j, "memory_total");
  r.memory_free = field<uint64_t>(j, "memory_free");
  r.reserve = field<uint64_t>(j, "reserve");
  r.floor = field<uint64_t>(j, "floor");
  r.copy_gbps = field<double>(j, "copy_gbps");
  r.cores = field<int>(j, "cores");
  r.page_size = field<uint64_t>(j, "page_size");
  r.driver_version = field<std::string>(j, "driver_version");
  r.runtime_version = field<std::string>(j, "runtime_version");
  r.measured_at = field<std::string>(j, "measured_at");
  r.host = field<std::string>(j, "host");

  if (r.memory_total == 0) fail("field 'memory_total' must be positive");
  if (r.memory_free > r.memory_total)
    fail("field 'memory_free': {} exceeds memory_total {}", r.memory_free, r.memory_total);
  if (!(r.copy_gbps > 0) || !std::isfinite(r.copy_gbps))
    fail("field 'copy_gbps' must be a positive bandwidth, found {}", r.copy_gbps);
  if (r.cores == 0) fail("field 'cores' must be positive");
  if (r.page_size == 0) fail("field 'page_size' must be positive");
  if (r.booster == "h200") {
    if (r.sm_count == 0) fail("field 'sm_count' must be positive for an h200 booster");
    if (r.compute_capability != "9.0")
      fail("field 'compute_capability': '{}' is not 9.0, the h200 target (sm_90a)", r.compute_capability);
  }
  p = std::move(r);
}

HardwareProfile load_profile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open hardware profile: {}", path.string(), std::strerror(errno));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    fail("{}: not valid JSON: {}", path.string(), e.what());
  }
  try {
    return j.get<HardwareProfile>();
  } catch (const Error& e) {
    fail("{}: {}", path.string(), e.what());
  }
}

void save_profile(const HardwareProfile& p, const std::filesystem::path& path) {
  const std::string text = json(p).dump(2) + "\n";
  // Same directory as the target, so rename() stays on one file system and is atomic.
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp.{}", getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", tmp.string(), std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("{}: write failed: {}", tmp.string(), std::strerror(err));
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("{}: flush failed: {}", tmp.string(), std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("{}: cannot rename {} into place: {}", path.string(), tmp.string(), std::strerror(err));
  }
}

// ---------------------------------------------------------------------------------------------
// Readable form

namespace {

std::string gib_text(uint64_t bytes) { return fmt::format("{:.2f} GiB", double(bytes) / double(kGiB)); }

std::string size_text(uint64_t bytes) {
  if (bytes >= kGiB) return gib_text(bytes);
  if (bytes >= kMiB) return fmt::format("{:.1f} MiB", double(bytes) / double(kMiB));
  return fmt::format("{} KiB", bytes / 1024);
}

}  // namespace

std::string describe_profile(const HardwareProfile& p) {
  std::string s;
  if (p.booster == "h200") {
    s += fmt::format("booster   h200: {} (compute {}, {} SMs)\n", p.device_name, p.compute_capability, p.sm_count);
    s += fmt::format("caches    L2 {}, shared memory per block {} (opt-in)\n", size_text(p.l2_bytes),
                     size_text(p.smem_per_block_optin));
  } else {
    s += fmt::format("booster   {}: {}\n", p.booster, p.device_name.empty() ? "unnamed CPU" : p.device_name);
    s += fmt::format("caches    L2 {} per core\n", size_text(p.l2_bytes));
  }
  s += fmt::format("memory    total {}, free {} ({} bytes)\n", gib_text(p.memory_total), gib_text(p.memory_free), p.memory_free);
  s += fmt::format("budget    usable {} = free {} - reserve {} - floor {}  ({} bytes)\n", gib_text(p.usable_bytes()),
                   gib_text(p.memory_free), size_text(p.reserve), size_text(p.floor), p.usable_bytes());
  s += fmt::format("copy      {:.1f} GB/s (read+write)\n", p.copy_gbps);
  s += fmt::format("machine   {}: {} hardware threads, page {}\n", p.host, p.cores, size_text(p.page_size));
  if (!p.driver_version.empty())
    s += fmt::format("cuda      driver {}, runtime {}\n", p.driver_version, p.runtime_version);
  s += fmt::format("measured  {}\n", p.measured_at);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Host probe

namespace {

constexpr int kHostCopyRuns = 3;  // after one warm-up copy; the best run is kept

// Reads "<key>: <n> kB" from /proc/meminfo, in bytes.
uint64_t meminfo_bytes(const char* key) {
  std::ifstream in("/proc/meminfo");
  if (!in) fail("probe host: cannot read /proc/meminfo");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(in, line)) {
    if (!line.starts_with(prefix)) continue;
    std::istringstream fields(line.substr(prefix.size()));
    uint64_t kb = 0;
    std::string unit;
    if (!(fields >> kb >> unit) || unit != "kB") fail("probe host: /proc/meminfo line '{}' is not '<n> kB'", line);
    return kb * 1024;
  }
  fail("probe host: /proc/meminfo has no {}", key);
}

// A cgroup v2 memory limit, if this process runs under one: MemAvailable describes the whole machine,
// but the OOM killer acts at the cgroup's limit. Returns false when there is no limit.
bool cgroup_limit(uint64_t& limit, uint64_t& used) {
  std::ifstream max_file("/sys/fs/cgroup/memory.max"), cur_file("/sys/fs/cgroup/memory.current");
  std::string max_text;
  if (!max_file || !(max_file >> max_text) || max_text == "max") return false;
  if (!cur_file || !(cur_file >> used)) return false;
  auto [end, ec] = std::from_chars(max_text.data(), max_text.data() + max_text.size(), limit);
  if (ec != std::errc() || end != max_text.data() + max_text.size())
    fail("probe host: /sys/fs/cgroup/memory.max holds '{}', neither 'max' nor a byte count", max_text);
  return true;
}

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<char, FreeDeleter>;

HostBuffer host_buffer(uint64_t bytes) {
  void* p = std::aligned_alloc(2 * kMiB, bytes);
  if (p == nullptr) fail("probe host: cannot allocate {} for the copy benchmark", size_text(bytes));
  // Huge pages cut first-touch faults, keeping the probe fast. Advice only: where transparent huge
  // pages are disabled the call fails and the copy runs on small pages, measuring the same bandwidth.
  (void)madvise(p, bytes, MADV_HUGEPAGE);
  return HostBuffer(static_cast<char*>(p));
}

// Each thread copies one contiguous 64 KiB-aligned slice, the way host kernels split their work, so
// the figure is what the host engine's threads can stream together rather than what one core can.
void parallel_copy(char* dst, const char* src, uint64_t bytes) {
#pragma omp parallel
  {
    const uint64_t threads = uint64_t(omp_get_num_threads()), t = uint64_t(omp_get_thread_num());
    const uint64_t slice = align_up((bytes + threads - 1) / threads);
    const uint64_t begin = std::min(bytes, t * slice), end = std::min(bytes, begin + slice);
    if (end > begin) std::memcpy(dst + begin, src + begin, end - begin);
  }
}

double host_copy_gbps(uint64_t bytes) {
  HostBuffer src = host_buffer(bytes), dst = host_buffer(bytes);
  // First touch by the threads that will copy, so pages land on their NUMA nodes. Non-zero bytes so
  // no zero-page shortcut applies.
#pragma omp parallel for schedule(static)
  for (int64_t page = 0; page < int64_t(bytes / kAlign); ++page) std::memset(src.get() + page * kAlign, 0x5a, kAlign);
  parallel_copy(dst.get(), src.get(), bytes);  // warm-up; faults dst in
  double best = 1e30;
  for (int run = 0; run < kHostCopyRuns; ++run) {
    auto t0 = std::chrono::steady_clock::now();
    parallel_copy(dst.get(), src.get(), bytes);
    std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  CHECK(std::memcmp(dst.get() + bytes - kAlign, src.get() + bytes - kAlign, kAlign) == 0,
        "host copy benchmark: destination differs from source");
  return 2.0 * double(bytes) / best / 1e9;  // read + write
}

}  // namespace

HardwareProfile probe_host_memory() {
  HardwareProfile p;
  p.booster = "host";
  p.device_name = cpu_model_name();
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);  // glibc reports 0 or -1 where it does not know
  p.l2_bytes = l2 > 0 ? uint64_t(l2) : 0;
  p.memory_total = meminfo_bytes("MemTotal");
  p.memory_free = meminfo_bytes("MemAvailable");
  uint64_t limit = 0, used = 0;
  if (cgroup_limit(limit, used)) {
    p.memory_total = std::min(p.memory_total, limit);
    p.memory_free = std::min(p.memory_free, limit > used ? limit - used : 0);
  }
  // NOTE: reserve is 0 on the host: there is no driver context or device-side workspace to measure.
  // What the host engine holds outside its arena (thread stacks, OpenMP pools, HTTP buffers) is a few
  // tens of MiB of ordinary heap, already inside the 2 GiB floor.
  p.reserve = 0;
  p.floor = kHostFloor;
  return p;
}

HardwareProfile probe_host(uint64_t copy_bytes) {
  CHECK(copy_bytes > 0 && is_aligned(copy_bytes), "probe_host: copy size must be a positive multiple of 64 KiB");
  // Memory is measured before the copy benchmark allocates its buffers.
  HardwareProfile p = probe_host_memory();
  if (2 * copy_bytes + p.floor > p.memory_free)
    fail("probe host: {} free is too little to time a copy of {} above the {} floor", gib_text(p.memory_free),
         size_text(copy_bytes), size_text(p.floor));
  p.copy_gbps = host_copy_gbps(copy_bytes);
  stamp_machine(p);
  return p;
}

bool cuda_compiled_in() {
#ifdef ROCKET_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

// ---------------------------------------------------------------------------------------------
// rocket probe

int probe_main(const std::vector<std::string>& args) {
  std::string booster, out;
  CLI::App cli("Measures one booster of this machine and prints its hardware profile: free memory, the reserve\n"
               "the engine holds outside its arena, the floor, copy bandwidth, and (h200) SMs, L2 and shared\n"
               "memory. With --out, also writes the profile as JSON (atomically) for `rocket build`.",
               "rocket probe");
  cli.add_option("--booster", booster, "host: the CPU of this machine; h200: CUDA device 0 (needs a CUDA build and an "
                                       "sm_90 GPU)")
      ->required()
      ->check(CLI::IsMember({"host", "h200"}));
  cli.add_option("--out", out, "write the JSON profile to FILE, e.g. boosters/h200.json");
  if (const auto rc = parse_command(cli, args)) return *rc;

  try {
    HardwareProfile p;
    if (booster == "host") {
      p = probe_host();
    } else {
#ifdef ROCKET_HAVE_CUDA
      p = probe_h200();
#else
      fail("booster h200 is not available: this rocket was built without CUDA (nvcc was not found when "
           "CMake configured the build)");
#endif
    }
    std::fputs(describe_profile(p).c_str(), stdout);
    if (!out.empty()) {
      save_profile(p, out);
      std::printf("wrote %s\n", out.c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "rocket probe: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace rocket
