#include "launch/countdown.h"

#include <chrono>
#include <cstdio>
#include <exception>

#include "core/error.h"

namespace rocket {

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::kUpright: return "upright";
    case Phase::kFuel: return "fuel";
    case Phase::kStaticFire: return "static_fire";
    case Phase::kLaunch: return "launch";
  }
  return "?";
}

void Countdown::run(Phase p, const std::function<std::string()>& step) {
  if (on_phase_) on_phase_(p);
  const auto t0 = std::chrono::steady_clock::now();
  std::string summary;
  try {
    summary = step();
  } catch (const std::exception& e) {
    // Engines name the phase in their own messages ("upright: ..."); say it once.
    std::string_view why = e.what();
    const std::string prefix = std::string(phase_name(p)) + ": ";
    if (why.starts_with(prefix)) why.remove_prefix(prefix.size());
    fail("countdown: {}: {}", phase_name(p), why);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "[countdown] %-11s %7.3f s  %s\n", std::string(phase_name(p)).c_str(), s, summary.c_str());
}

void Countdown::launch() {
  if (on_phase_) on_phase_(Phase::kLaunch);
  std::fprintf(stderr, "[countdown] launch: accepting traffic\n");
}

}  // namespace rocket
