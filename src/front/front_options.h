// The flags of `rocket-engine front` (and `rocket front`, which checks them before handing the
// command line to the engine): the front's own, and the rest, which go unchanged to every replica it
// spawns (`rocket-engine launch`'s flags, checked against launch's table here).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/cli.h"

namespace rocket {

struct FrontOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  int replicas = 0;                        // replicas to spawn, one per GPU
  std::vector<std::string> replica_urls;   // replicas already running, fronted as they are
  std::vector<std::string> replica_args;   // launch flags for the spawned replicas
  double health_interval = 0.5;            // seconds between health probes of every replica
  double drain_timeout = 30;               // SIGTERM: seconds the replicas get to finish (forwarded)
  double startup_timeout = 600;            // seconds spawned replicas get to reach launch
  size_t http_threads = 256;               // as ServerOptions::http_threads: one per open client
  size_t max_body_bytes = 0;               // the replicas' --max-body-bytes; 0: launch's default for the plan
};

// Declares the front's flags on `cmd`.
void add_front_options(CLI::App& cmd, FrontOptions& o);
// As parse_command (core/cli.h), except that the words the front does not know become
// o.replica_args, checked as `launch` flags (only with --replicas: they are the spawned replicas').
// Without --replicas or --replica, a plan of `plan_boosters` > 1 boosters spawns that many; a
// one-booster plan needs one of them. nullopt: run; else the exit status (0 after --help, 2 after a
// usage error, reason on stderr).
std::optional<int> parse_front_command(CLI::App& cmd, FrontOptions& o, const std::vector<std::string>& args,
                                       int plan_boosters = 1);

}  // namespace rocket
