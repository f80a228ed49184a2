// Facts about the machine a booster is attached to, shared by probe_host (profile.cc) and probe_h200
// (probe_h200.cu). Header-only on purpose: rocket_cuda is linked after rocket_lib, so its objects
// must not depend on symbols that only rocket_lib's objects define. No fmt either (see error.h).
#pragma once

#include <sched.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <string>

#include "boosters/profile.h"
#include "core/error.h"

namespace rocket {

// Threads the engine can actually run on: the CPU affinity mask, which honours taskset/cpusets,
// rather than every CPU the kernel knows of.
inline int usable_hardware_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n <= 0) throw Error("probe: cannot count hardware threads (sched_getaffinity and sysconf both failed)");
  return int(n);
}

inline std::string utc_timestamp_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The CPU's model name from /proc/cpuinfo ("" where it gives none): a host booster's device name.
// Here rather than in profile.cc so that what names a booster (topology.cc, linked into every
// engine) does not pull in the bandwidth probe's OpenMP code, which the h200 engine does not link.
inline std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("model name")) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

// Fills cores, page_size, measured_at and host.
inline void stamp_machine(HardwareProfile& p) {
  p.cores = usable_hardware_threads();
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) throw Error("probe: sysconf(_SC_PAGESIZE) failed");
  p.page_size = uint64_t(page);
  p.measured_at = utc_timestamp_now();
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) throw Error("probe: gethostname failed");
  p.host = name;
}

}  // namespace rocket
