#include "launch/launch.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "http/server.h"
#include "launch/countdown.h"
#include "openai/prompt_builder.h"
#include "scheduler/generation.h"
#include "scheduler/scheduler.h"

namespace rocket {

namespace {

struct LaunchOptions {
  ServerOptions server;
  SchedulerOptions scheduler;
  uint64_t reserve_bytes = 0;  // memory kept back for other work, on top of the profile's floor
  std::string force_tokens;    // TEST-ONLY: scheduler/generation.h ForcedTokens
  uint64_t max_body_bytes = 0;  // 0: default_max_body_bytes(the plan's context)
};

// "512", "64K", "2M", "100000G": bytes, with a binary suffix.
uint64_t parse_bytes(const std::string& text) {
  size_t used = 0;
  const unsigned long long n = std::stoull(text, &used);
  const std::string suffix = text.substr(used);
  const int shift = suffix.empty() ? 0 : suffix == "K" ? 10 : suffix == "M" ? 20 : suffix == "G" ? 30 : -1;
  if (shift < 0) fail("{}: expected a byte count with an optional K, M or G suffix", text);
  return uint64_t(n) << shift;
}

LaunchOptions parse_options(const std::vector<std::string>& args) {
  auto get = [&](const std::string& k, const std::string& def) {
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == k) return args[i + 1];
    return def;
  };
  // A mistyped flag (`--prot 8080`) is refused rather than ignored: the server would start on defaults.
  static constexpr std::string_view kFlags[] = {"--host",  "--port",           "--api-key", "--queue",
                                                "--reserve", "--prefill-budget", "--force-tokens",
                                                "--max-body-bytes", "--max-json-depth"};
  for (size_t i = 0; i < args.size(); i += 2) {
    if (std::find(std::begin(kFlags), std::end(kFlags), args[i]) == std::end(kFlags))
      fail("launch: unknown argument '{}' (usage: {})", args[i], kLaunchUsage);
    if (i + 1 == args.size()) fail("launch: {} needs a value", args[i]);
  }
  LaunchOptions o;
  o.server.host = get("--host", "127.0.0.1");
  o.server.port = std::stoi(get("--port", "8000"));
  o.server.api_key = get("--api-key", "");
  o.scheduler.queue_capacity = size_t(std::stoul(get("--queue", std::to_string(o.scheduler.queue_capacity))));
  o.scheduler.prefill_budget = std::stoi(get("--prefill-budget", "0"));
  o.reserve_bytes = parse_bytes(get("--reserve", "0"));
  o.force_tokens = get("--force-tokens", "");
  o.max_body_bytes = parse_bytes(get("--max-body-bytes", "0"));
  o.server.max_json_depth = std::stoi(get("--max-json-depth", std::to_string(kDefaultMaxJsonDepth)));
  // Every recursive walk over request JSON is bounded by this depth on an HTTP thread's stack.
  if (o.server.max_json_depth < 1 || o.server.max_json_depth > 1024)
    fail("launch: --max-json-depth {} is outside [1, 1024]", o.server.max_json_depth);
  return o;
}

}  // namespace

int launch(const std::filesystem::path& dir, const std::vector<std::string>& args, const LaunchSteps& steps) {
  LaunchOptions o = parse_options(args);
  o.server.max_body_bytes = o.max_body_bytes ? o.max_body_bytes : default_max_body_bytes(steps.max_context);
  ::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is seen as a failed write, not a signal
  // The server listens from the first second: /health reports the countdown's phase, /v1/* answer 503.
  HttpServer server(o.server);
  server.start();
  Countdown cd([&](Phase p) { server.set_phase(std::string(phase_name(p))); });
  cd.run(Phase::kUpright, [&] { return steps.upright(o.reserve_bytes); });
  cd.run(Phase::kFuel, steps.fuel);
  cd.run(Phase::kStaticFire, steps.static_fire);

  BatchEngine& engine = steps.engine();
  const Plan& plan = engine.plan();
  ModelInfo model{dir.filename().string(),
                  {{"fingerprint", plan.fingerprint},    {"booster", plan.booster},
                   {"max_context", plan.max_context},    {"max_streams", plan.max_streams},
                   {"prefill_chunk", plan.prefill_chunk}, {"buckets", plan.buckets},
                   {"kv_page_tokens", plan.kv_page_tokens}, {"state_snapshots", plan.state_snapshots}}};
  std::optional<ForcedTokens> forced;
  if (!o.force_tokens.empty()) {
    forced = ForcedTokens::load(o.force_tokens);
    std::fprintf(stderr, "[engine] TEST-ONLY: %zu forced token sequences from %s replace sampling for requests "
                         "whose `user` names one\n", forced->size(), o.force_tokens.c_str());
  }
  Scheduler scheduler(PromptBuilder(dir.string()), engine, std::move(model), o.scheduler, forced ? &*forced : nullptr);
  server.launch(scheduler);
  cd.launch();
  server.wait();
  return 0;
}

}  // namespace rocket
