// `rocket-engine launch`: the countdown (upright → fuel → static fire) on the host engine, then the
// OpenAI-compatible server over the continuous-batching scheduler until the process is stopped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "serve/scheduler.h"
#include "serve/server.h"

namespace rocket {

struct LaunchOptions {
  ServerOptions server;
  SchedulerOptions scheduler;
  uint64_t reserve_bytes = 0;  // memory kept back for other work, on top of the profile's floor
  std::string force_tokens;    // TEST-ONLY: serve/generation.h ForcedTokens
};

// Returns the exit status; a failed phase throws Error("countdown: <phase>: <reason>").
int launch(const std::filesystem::path& engine_dir, const LaunchOptions& options);

}  // namespace rocket
