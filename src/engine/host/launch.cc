#include "engine/host/launch.h"

#include <csignal>
#include <cmath>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "engine/host/host_batch_engine.h"
#include "kernels/host/sample.h"
#include "serve/countdown.h"
#include "serve/generation.h"
#include "serve/prompt_builder.h"
#include "serve/scheduler.h"
#include "serve/server.h"

namespace rocket {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Static fire: every compiled bucket runs once (so the first request pays no first-touch cost and a
// broken bucket is found now), then the plan's golden prompt must give the reference's greedy token.
std::string static_fire(HostEngine& e) {
  const Plan& plan = e.plan();
  std::vector<int32_t> ids(size_t(plan.max_streams));
  std::vector<int> slots(size_t(plan.max_streams));
  std::vector<int64_t> pos(size_t(plan.max_streams), 0);
  for (int i = 0; i < plan.max_streams; ++i) ids[size_t(i)] = int32_t((i * 7919) % engine::kVocab), slots[size_t(i)] = i;
  for (int b : plan.buckets) {
    for (int i = 0; i < b; ++i) e.reset_slot(i);
    e.decode(b, ids.data(), slots.data(), pos.data());
    for (int i = 0; i < b; ++i)
      for (int v = 0; v < engine::kVocab; v += 997)
        if (!std::isfinite(e.logits(i)[v])) fail("bucket {} row {} produced a non-finite logit", b, i);
  }
  std::string summary = fmt::format("{} buckets warm", plan.buckets.size());
  const StaticFire& sf = plan.static_fire;
  if (sf.prompt.empty()) return summary + "; no golden token in the plan (build with --golden to check one)";
  e.reset_slot(0);
  const int32_t got = host::argmax(e.prefill_prompt(0, sf.prompt), int(engine::kVocab));
  e.reset_slot(0);
  if (got != sf.token)
    fail("the golden prompt gave token {}, the reference's greedy token is {} (reference margin {:.3f}; {})", got,
         sf.token, sf.margin, sf.source);
  return summary + fmt::format("; golden token {} after {} prompt tokens matches the reference", got,
                               sf.prompt.size());
}

}  // namespace

int launch(const std::filesystem::path& dir, const LaunchOptions& o) {
  ::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is seen as a failed write, not a signal
  // The server listens from the first second: /health reports the countdown's phase, /v1/* answer 503.
  HttpServer server(o.server);
  server.start();
  Countdown cd([&](Phase p) { server.set_phase(std::string(phase_name(p))); });
  std::unique_ptr<HostEngine> engine;
  cd.run(Phase::kUpright, [&] {
    engine = std::make_unique<HostEngine>(dir.string(), o.reserve_bytes);
    const Plan& p = engine->plan();
    return fmt::format("plan {} on {}: residency {:.1f} MiB, {} streams, context {}", p.fingerprint, p.booster,
                       p.arena_bytes / 1048576.0, p.max_streams, p.max_context);
  });
  cd.run(Phase::kFuel, [&] {
    const auto t0 = Clock::now();
    const uint64_t bytes = engine->load_weights();
    const double s = seconds_since(t0);
    return fmt::format("{:.1f} MiB of weights resident in {:.3f} s ({:.2f} GB/s)", bytes / 1048576.0, s,
                       bytes / std::max(s, 1e-9) / 1e9);
  });
  cd.run(Phase::kStaticFire, [&] { return static_fire(*engine); });

  const Plan& plan = engine->plan();
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
  HostBatchEngine batch(*engine);
  Scheduler scheduler(PromptBuilder(dir.string()), batch, std::move(model), o.scheduler,
                      forced ? &*forced : nullptr);
  server.launch(scheduler);
  cd.launch();
  server.wait();
  return 0;
}

}  // namespace rocket
