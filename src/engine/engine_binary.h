// EngineBinary: what one engine (engine/host/, engine/h200/) supplies to its binary,
// ENGINE_DIR/bin/rocket-engine: its own commands (parity, bench, ...) and its countdown steps. The
// binary's command line (cli/rocket_engine.cc, compiled into every engine) adds the commands every
// engine has the same way, `launch` (also `serve`) and `front`, and owns the usage, the dispatch and
// the exit statuses.
//
// NOTE: the engine is asked, not the other way round, so that no engine includes the server rooms
// (launch/, front/): an engine is a model on a booster, and serving it is the rooms above it that
// take its LaunchSteps (docs/rooms.md).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/launch_steps.h"

namespace rocket {

// `rocket-engine NAME ARGS...`: run(ENGINE_DIR, ARGS) returns the exit status (2: a bad flag, from
// core/cli.h's parse_command) or throws Error (exit 1, its message on stderr).
struct EngineCommand {
  std::string name;
  std::string summary;  // its line in `rocket-engine --help`
  std::function<int(const std::filesystem::path& engine_dir, const std::vector<std::string>& args)> run;
};

struct EngineBinary {
  std::vector<EngineCommand> commands;  // the engine's own, in the order --help lists them
  // Where `front` spawns its replicas, in its --help line ("one per GPU"); "" says nothing.
  std::string replicas_on;
  std::string about;  // a last line of --help ("" for none)
  // `launch`: the countdown's steps over an engine of `engine_dir`, created by upright. The steps
  // own the engine, which lives as long as they do.
  std::function<LaunchSteps(const std::filesystem::path& engine_dir)> launch_steps;
};

// Defined once by each engine (engine/host/host_binary.cc, engine/h200/h200_binary.cu).
EngineBinary engine_binary();

}  // namespace rocket
