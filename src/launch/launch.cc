#include "launch/launch.h"

#include <semaphore.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "boosters/handshake.h"
#include "boosters/topology.h"
#include "core/error.h"
#include "http/server.h"
#include "launch/countdown.h"
#include "openai/prompt_builder.h"
#include "scheduler/generation.h"
#include "scheduler/scheduler.h"

namespace rocket {

namespace {

// Wakes launch() once it serves: posted by the SIGTERM / SIGINT handler (sem_post is
// async-signal-safe, unlike a mutex or a condition variable) and by the scheduler when the engine fails.
sem_t g_wake;
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  g_signal = sig;
  sem_post(&g_wake);
}

}  // namespace

int launch(const std::filesystem::path& dir, const LaunchOptions& options, const LaunchSteps& steps) {
  LaunchOptions o = options;
  o.server.max_body_bytes = o.max_body_bytes ? o.max_body_bytes : default_max_body_bytes(steps.max_context);
  o.server.api_keys = ApiKeys::load(o.api_key, o.api_key_file, std::getenv("ROCKET_API_KEY"));
  ::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is seen as a failed write, not a signal
  Telemetry telemetry(o.telemetry);
  o.server.telemetry = &telemetry;
  o.server.forced_tokens = !o.force_tokens.empty();
  o.scheduler.telemetry = &telemetry;
  o.scheduler.image_limits.max_bytes = o.server.images.max_bytes;
  // The server listens from the first second: /health reports the countdown's phase, /v1/* answer 503.
  HttpServer server(o.server);
  server.start();
  Countdown cd([&](Phase p) { server.set_phase(std::string(phase_name(p))); });
  cd.run(Phase::kUpright, [&] {
    // The rocket before the engine: an arrangement with no engine yet, or boosters other than the
    // plan's, refuse before anything is mapped. The handshake the front reads comes from the same plan.
    const Plan plan = Plan::load((dir / "plan.json").string());
    if (const std::string why = unbuilt_arrangement(plan); !why.empty()) fail("{}", why);
    const Topology machine = visible_topology(plan.booster);
    if (const std::string m = launch_mismatch(plan, machine); !m.empty()) fail("boosters: {}", m);
    server.set_handshake(handshake_of(plan, dir, machine).to_json().dump());
    return steps.upright(o.reserve_bytes);
  });
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
                         "whose `user` (or x-rocket-force header) names one\n", forced->size(), o.force_tokens.c_str());
  }
  sem_init(&g_wake, 0, 0);
  o.scheduler.on_failure = [] { sem_post(&g_wake); };
  Scheduler scheduler(PromptBuilder(dir.string()), engine, std::move(model), o.scheduler, forced ? &*forced : nullptr);
  // Until here a signal ends the process at once: nothing is served before launch.
  struct sigaction stop {};
  stop.sa_handler = on_stop_signal;
  sigemptyset(&stop.sa_mask);
  ::sigaction(SIGTERM, &stop, nullptr);
  ::sigaction(SIGINT, &stop, nullptr);
  server.launch(scheduler);
  cd.launch();
  while (sem_wait(&g_wake) != 0 && errno == EINTR) {
  }

  if (g_signal == 0) {
    // The engine failed and every request has had its error: exit so that a supervisor restarts it.
    std::fprintf(stderr, "[launch] the engine failed (%s); exiting\n", scheduler.state().reason.c_str());
    server.wait_responses(std::chrono::seconds(5));  // the errors reach the clients
    server.stop();
    server.wait();
    return 1;
  }
  // A second signal ends the process at once, as a user pressing ^C twice means.
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGINT, SIG_DFL);
  std::fprintf(stderr, "[launch] %s: draining, up to %g s for the requests in flight\n",
               g_signal == SIGINT ? "SIGINT" : "SIGTERM", o.drain_timeout);
  const auto started = std::chrono::steady_clock::now();
  const int aborted =
      scheduler.drain(started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(o.drain_timeout)));
  // Every request has its last event; let the HTTP threads write them (a client that stopped reading
  // gets a few seconds), then close.
  if (!server.wait_responses(std::chrono::seconds(5)))
    std::fprintf(stderr, "[launch] some responses were still being written 5 s after the drain; closing them\n");
  server.stop();
  server.wait();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (scheduler.state().status == LoopState::Status::kFailed) {
    std::fprintf(stderr, "[launch] the engine failed while draining (%s); exiting\n", scheduler.state().reason.c_str());
    return 1;
  }
  std::fprintf(stderr, "[launch] drained in %.1f s (%d requests cut off at the deadline); exiting\n", took, aborted);
  return 0;
}

}  // namespace rocket
