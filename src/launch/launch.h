// `rocket-engine launch`: the countdown (upright → fuel → static fire → launch), then the
// OpenAI-compatible server over the continuous-batching scheduler until the process is stopped. The
// same for every booster: an engine binary hands over its three countdown steps and its BatchEngine
// (engine/launch_steps.h).
#pragma once

#include <filesystem>

#include "engine/launch_steps.h"
#include "launch/launch_options.h"

namespace rocket {

// Runs the countdown and serves with `options` (launch_options.h). Returns the exit status; a failed
// phase throws Error("countdown: <phase>: <reason>").
int launch(const std::filesystem::path& engine_dir, const LaunchOptions& options, const LaunchSteps& steps);

}  // namespace rocket
