// `rocket-engine launch`: the countdown (upright → fuel → static fire → launch), then the
// OpenAI-compatible server over the continuous-batching scheduler until the process is stopped. The
// same for every booster: an engine binary hands over its three countdown steps and its BatchEngine.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "launch/launch_options.h"
#include "boosters/memory_budget.h"
#include "scheduler/batch_engine.h"

namespace rocket {

// One booster's engine as the countdown drives it. Each step returns a line saying what it did (the
// countdown logs it with the phase's duration) and throws Error with the reason when it fails.
struct LaunchSteps {
  // Map and check the plan, admit its memory keeping `reserve_bytes` back for other work.
  std::function<std::string(uint64_t reserve_bytes)> upright;
  std::function<std::string()> fuel;         // weights resident
  std::function<std::string()> static_fire;  // every bucket warm; the plan's golden token, when it has one
  std::function<BatchEngine&()> engine;      // valid after fuel
  std::function<MemoryBudget()> budget;      // what upright measured and admitted the plan against
  int64_t max_context = 0;  // the plan's (engine.h kMaxContext): sizes the request-body limit before upright
};

// Runs the countdown and serves with `options` (launch_options.h). Returns the exit status; a failed
// phase throws Error("countdown: <phase>: <reason>").
int launch(const std::filesystem::path& engine_dir, const LaunchOptions& options, const LaunchSteps& steps);

}  // namespace rocket
