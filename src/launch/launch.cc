#include "launch/launch.h"

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "http/server.h"
#include "launch/countdown.h"
#include "openai/prompt_builder.h"
#include "scheduler/generation.h"
#include "scheduler/scheduler.h"

namespace rocket {

int launch(const std::filesystem::path& dir, const LaunchOptions& options, const LaunchSteps& steps) {
  LaunchOptions o = options;
  o.server.max_body_bytes = o.max_body_bytes ? o.max_body_bytes : default_max_body_bytes(steps.max_context);
  o.server.api_keys = ApiKeys::load(o.api_key, o.api_key_file, std::getenv("ROCKET_API_KEY"));
  ::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is seen as a failed write, not a signal
  Telemetry telemetry(o.telemetry);
  o.server.telemetry = &telemetry;
  o.scheduler.telemetry = &telemetry;
  // The server listens from the first second: /health reports the countdown's phase, /v1/* answer 503.
  HttpServer server(o.server);
  server.start();
  Countdown cd([&](Phase p) { server.set_phase(std::string(phase_name(p))); });
  cd.run(Phase::kUpright, [&] { return steps.upright(o.reserve_bytes); });
  cd.run(Phase::kFuel, steps.fuel);
  cd.run(Phase::kStaticFire, steps.static_fire);

  BatchEngine& engine = steps.engine();
  const Plan& plan = engine.plan();
  telemetry.set_plan(plan);
  telemetry.metrics().set_memory(steps.budget(), plan.arena_bytes);
  engine.time_steps(telemetry.step_sample(), [&telemetry](const StepSplit& s) { telemetry.metrics().step(s); });
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
