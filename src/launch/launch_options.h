// The flags of `launch` (and `serve`), declared once for every binary that takes them: each engine's
// `rocket-engine launch` parses them, and `rocket launch` checks them before it hands the command
// line to the engine.
#pragma once

#include <cstdint>
#include <string>

#include "core/cli.h"
#include "http/server.h"
#include "scheduler/scheduler.h"
#include "telemetry/telemetry.h"

namespace rocket {

struct LaunchOptions {
  ServerOptions server;
  SchedulerOptions scheduler;
  uint64_t reserve_bytes = 0;  // memory kept back for other work, on top of the profile's floor
  std::string force_tokens;    // TEST-ONLY: scheduler/generation.h ForcedTokens
  uint64_t max_body_bytes = 0;  // 0: default_max_body_bytes(the plan's context)
  std::string api_key, api_key_file;  // with ROCKET_API_KEY, into server.api_keys (launch.cc)
  TelemetryOptions telemetry;
  double drain_timeout = 30;  // seconds SIGTERM / SIGINT lets in-flight requests finish
};

// Declares --host, --port, --served-model-name, --api-key, --api-key-file, --queue, --prefill-budget, --reserve,
// --max-body-bytes, --max-json-depth, --otlp-traces-endpoint, --step-sample, --drain-timeout and --force-tokens on
// `cmd`; parsing fills `o`. Its --help ends with the server's endpoints (kLaunchEndpoints).
void add_launch_options(CLI::App& cmd, LaunchOptions& o);

// Every route the launched server answers (http/server.cc registers them; docs/api.md describes them),
// for the help of every command that launches one.
extern const char* const kLaunchEndpoints;

}  // namespace rocket
