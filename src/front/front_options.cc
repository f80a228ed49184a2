#include "front/front_options.h"

#include <cstdio>

#include <fmt/format.h>

#include "launch/launch_options.h"

namespace rocket {

void add_front_options(CLI::App& cmd, FrontOptions& o) {
  cmd.add_option("--host", o.host, "address the front listens on")->capture_default_str();
  cmd.add_option("--port", o.port, "port the front listens on")->check(in_range(1, 65535))->capture_default_str();
  cmd.add_option("--replicas", o.replicas,
                 "spawn N replicas of this engine (`launch`, one process per GPU: CUDA_VISIBLE_DEVICES=i) on free "
                 "loopback ports")
      ->check(in_range(1, 64));
  cmd.add_option("--replica", o.replica_urls, "front a replica already serving at http://HOST:PORT (repeatable)")
      ->type_name("URL");
  cmd.add_option("--health-interval", o.health_interval, "seconds between health probes of every replica")
      ->check(in_range(0.05, 60))
      ->capture_default_str();
  cmd.add_option("--drain-timeout", o.drain_timeout,
                 "SIGTERM: seconds in-flight requests get (forwarded to spawned replicas as their --drain-timeout)")
      ->check(in_range(0, 86400))
      ->capture_default_str();
  cmd.add_option("--startup-timeout", o.startup_timeout, "seconds spawned replicas get to pass their countdown")
      ->check(in_range(1, 86400))
      ->capture_default_str();
}

std::optional<int> parse_front_command(CLI::App& cmd, FrontOptions& o, const std::vector<std::string>& args,
                                       int plan_boosters) {
  const std::string name = cmd.get_name();
  auto usage = [&](const std::string& why) {
    std::fprintf(stderr, "%s: %s (%s --help lists the options)\n", name.c_str(), why.c_str(), name.c_str());
    return 2;
  };
  std::vector<const char*> argv = {name.c_str()};
  for (const std::string& a : args) argv.push_back(a.c_str());
  cmd.allow_extras();
  try {
    cmd.parse(int(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help
      std::fputs(cmd.help().c_str(), stdout);
      std::fputs("Other flags are launch's (rocket-engine launch --help) and go to every spawned replica.\n", stdout);
      return 0;
    }
    return usage(e.what());
  }
  if (o.replicas == 0 && o.replica_urls.empty() && plan_boosters > 1 && !cmd.count("--replicas"))
    o.replicas = plan_boosters;  // the plan's rocket: one replica per booster
  if ((o.replicas > 0) == !o.replica_urls.empty())
    return usage("give either --replicas N (spawn them) or --replica URL ... (front running ones); a plan built with "
                 "--boosters N spawns N by default");
  o.replica_args = cmd.remaining();
  if (o.replica_args.empty()) return std::nullopt;
  if (o.replicas == 0)
    return usage(fmt::format("unknown argument '{}' (launch flags go to spawned replicas only: --replicas N)",
                             o.replica_args.front()));
  // The replicas' flags are launch's: refused here rather than by every child at once.
  CLI::App launch_cli("replica launch flags", name + " (replica flags)");
  LaunchOptions lo;
  add_launch_options(launch_cli, lo);
  if (const auto rc = parse_command(launch_cli, o.replica_args)) return *rc == 0 ? 2 : *rc;
  o.max_body_bytes = lo.max_body_bytes;  // a body the replicas would refuse is refused here, unread
  return std::nullopt;
}

}  // namespace rocket
