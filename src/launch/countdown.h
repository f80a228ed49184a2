// The launch countdown (docs/countdown.md): upright → fuel → static fire → launch. Each phase is
// one engine-specific step run in order; the countdown logs every phase's duration, reports the
// current phase (GET /health says it, and nothing is served before launch), and turns a failure into
// an Error that names the phase, so `rocket launch` exits non-zero saying where and why it stopped.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace rocket {

enum class Phase { kUpright, kFuel, kStaticFire, kLaunch };

std::string_view phase_name(Phase p);  // "upright", "fuel", "static_fire", "launch"

class Countdown {
 public:
  // `on_phase` is told each phase as it begins (e.g. the HTTP server's /health).
  explicit Countdown(std::function<void(Phase)> on_phase = {}) : on_phase_(std::move(on_phase)) {}

  // Runs `step`, which returns a one-line summary for the log, as phase `p`. Any exception from the
  // step is rethrown as Error("countdown: <phase>: <reason>").
  void run(Phase p, const std::function<std::string()>& step);
  // Enters the last phase: launch (accepting traffic).
  void launch();

 private:
  std::function<void(Phase)> on_phase_;
};

}  // namespace rocket
