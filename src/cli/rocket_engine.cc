// rocket-engine: the command line of every engine binary (ENGINE_DIR/bin/rocket-engine), compiled into
// each engine by `rocket build` (compiler/toolchain.cc) beside the engine's own sources. The engine
// supplies its own commands and its countdown steps (engine/engine_binary.h); this file adds what is
// the same for every engine, `launch` (also spelled `serve`: launch/launch.h) and `front`
// (front/front.h), and owns the usage, the dispatch and the exit statuses: 0 done, 1 a failure
// (Error, its message on stderr), 2 a bad command line. `rocket-engine COMMAND --help` lists a
// command's flags. The engine directory is the parent of the binary's folder.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/cli.h"
#include "core/error.h"
#include "engine/engine_binary.h"
#include "front/front.h"
#include "launch/launch.h"

namespace fs = std::filesystem;

namespace rocket {
namespace {

// `launch` / `serve`: the launch flags, then the countdown over the engine's steps and the server.
int cmd_launch(const EngineBinary& binary, const fs::path& dir, const std::vector<std::string>& args) {
  LaunchOptions o;
  CLI::App cli("The launch countdown (upright, fuel, static fire), then the OpenAI-compatible server.",
               "rocket-engine launch");
  add_launch_options(cli, o);
  if (const auto rc = parse_command(cli, args)) return *rc;
  return launch(dir, o, binary.launch_steps(dir));
}

// Every command of this binary: the engine's own, then launch and front.
std::vector<EngineCommand> commands_of(const EngineBinary& binary) {
  std::vector<EngineCommand> all = binary.commands;
  all.push_back({"launch", "the countdown, then the OpenAI-compatible server (also: serve)",
                 [&binary](const fs::path& dir, const std::vector<std::string>& args) { return cmd_launch(binary, dir, args); }});
  const std::string on = binary.replicas_on.empty() ? "" : ", " + binary.replicas_on + ",";
  all.push_back({"front", fmt::format("N replicas of this engine{} behind one routing front (the replicated arrangement)", on),
                 [](const fs::path& dir, const std::vector<std::string>& args) {
                   return front_main(dir / "bin" / "rocket-engine", args);
                 }});
  return all;
}

std::string usage(const EngineBinary& binary, const std::vector<EngineCommand>& commands) {
  size_t width = 0;
  for (const EngineCommand& c : commands) width = std::max(width, c.name.size());
  std::string out = "usage: rocket-engine COMMAND [options]   (rocket-engine COMMAND --help lists its options)\n";
  for (const EngineCommand& c : commands) out += fmt::format("  {:<{}}  {}\n", c.name, width, c.summary);
  if (!binary.about.empty()) out += binary.about + "\n";
  return out;
}

}  // namespace
}  // namespace rocket

int main(int argc, char** argv) {
  using namespace rocket;
  const EngineBinary binary = engine_binary();
  const std::vector<EngineCommand> commands = commands_of(binary);
  const std::string help = usage(binary, commands);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(help.c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const fs::path dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  const std::string name = argv[1] == std::string("serve") ? "launch" : argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  const auto command = std::find_if(commands.begin(), commands.end(), [&](const EngineCommand& c) { return c.name == name; });
  if (command == commands.end()) {
    std::fprintf(stderr, "rocket-engine: unknown command '%s'\n%s", argv[1], help.c_str());
    return 2;
  }
  try {
    return command->run(dir, args);
  } catch (const Error& e) {
    std::fprintf(stderr, "rocket-engine: %s\n", e.what());
    return 1;
  }
}
