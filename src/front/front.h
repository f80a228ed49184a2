// The replicated arrangement's HTTP front (`rocket-engine front`): one OpenAI-compatible endpoint
// over N replicas, each a full engine in a process of its own (one per GPU on the H200; N host
// engines in CI). It holds no model and no cache: per request it asks every replica in rotation how
// much of the prompt its prefix cache holds (POST /prefix/v1/...; EngineLoop::report_prefix), picks
// one (front/route.h: longest cached prefix, else least loaded) and proxies the request there, the
// replica's status and body passed through and a stream relayed chunk by chunk; a client that hangs
// up mid-stream closes the upstream connection, which the replica sees as its own client leaving.
//
// Failover: a health thread probes every replica's /health; one that is not ok, refuses
// connections or has exited is out of rotation until it is ok again. A request that could not be
// sent (no response came back) is retried on another replica; a stream that has begun is never
// retried. With no replica in rotation the front answers 503 in OpenAI's error shape.
//
// Endpoints besides /v1/*: /health (200 while >= 1 replica is ok, per-replica status in the body),
// /metrics (front/exposition.h, plus the front's own rocket_front_* series), /stats (each replica's).
//
// Startup: a replica enters rotation once its /health is ok and its handshake (boosters/handshake.h)
// matches the front's plan and the first admitted peer (front/admission.h); a refusal during startup
// stops the front (exit 1, the field and both values on stderr), a later one keeps that replica out.
//
// Drain: SIGTERM or SIGINT stops routing (new requests 503 shutting_down), forwards SIGTERM to the
// replicas it spawned (each drains with --drain-timeout), waits for them and for the responses being
// relayed, and exits 0 (1 when a replica did not drain cleanly).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "front/front_options.h"

namespace rocket {

class Admission;

// Runs the front until it is drained; returns the exit status. `engine_exe`: the engine binary the
// spawned replicas run (`launch`); `admission` admits each replica by its handshake.
int run_front(const std::filesystem::path& engine_exe, const FrontOptions& options, Admission& admission);

// `rocket-engine front ARGS`: parses and runs. The engine's plan sets the default replica count (its
// boosters) and what every replica's handshake must match; a split plan, a replica count other than
// a multi-booster plan's, or fewer GPUs than replicas is refused (exit 1).
int front_main(const std::filesystem::path& engine_exe, const std::vector<std::string>& args);

}  // namespace rocket
