// The OpenAI-compatible HTTP front: an HttpServer whose HTTP threads parse and answer
// requests, and an EngineLoop that owns the engine on one thread of its own. HTTP threads never
// touch the engine: they submit() a request (rendered and tokenised on the HTTP thread, which needs
// only the thread-safe Tokenizer and ChatTemplate), the loop thread runs it, and the tokens come back
// by request id through the request's RequestSink (llama.cpp server style).
//
// The loop is the continuous-batching Scheduler (scheduler/scheduler.h); the per-request output side
// (sampling, logprobs, detokenising, stop strings, usage, the RequestSink) is a Generation
// (scheduler/generation.h). This file has no engine dependency and lives in librocket.
//
// The server listens from the start of the countdown: /health reports the phase (503 until launch)
// and /v1/* answer 503 until launch() hands it the loop; /handshake answers once upright has read the plan. After launch /health follows the loop's
// state(): 200 "ok" while serving, 503 "draining" or "failed".
//
// tool_choice required / named is enforced by the prompt, which ends with the opening of the call
// (openai/prompt_builder.h); parallel_tool_calls=false by the output parser, whose turn completes at
// the first call, and the loop then stops the request (RequestSink::request_stop).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/api_keys.h"
#include "openai/openai_request.h"
#include "scheduler/engine_loop.h"
#include "telemetry/telemetry.h"

namespace rocket {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  ApiKeys api_keys;  // non-empty: /v1/* requires "Authorization: Bearer <one of them>"
  // HTTP threads. A connection holds one for its life (a stream, a request waiting for its whole
  // response, an idle keep-alive), so this bounds concurrent clients; further connections wait to be
  // served. httplib's default (the core count, at least 8) would cap a scheduler of 32 streams.
  size_t http_threads = 256;
  // A larger body is answered 413 from its Content-Length, without being parsed (launch sizes it from
  // the plan's context: default_max_body_bytes).
  size_t max_body_bytes = 8u << 20;
  int max_json_depth = kDefaultMaxJsonDepth;  // deeper request JSON is a 400 (openai_request.h)
  // Images per request (more: 400) and bytes per image (more: 413), checked while parsing.
  ImageBounds images;
  // GET /metrics and the refusal counters; null: /metrics answers 503. REQUIRES: outlives the server.
  Telemetry* telemetry = nullptr;
  // The names requests may give as `model` (--served-model-name), all listed by /v1/models; empty: the
  // engine's own id (its directory's name). A response names the model as the request did.
  std::vector<std::string> served_model_names;
  // TEST-ONLY (--force-tokens): a request with the header `x-rocket-force: NAME` takes the forced
  // sequence "NAME.N", N the tool results in its conversation, so that a coding agent's session
  // (which sends no `user` of the test's choosing) gets one scripted output per turn.
  bool forced_tokens = false;
};

// Room for a prompt filling the context, JSON-escaped, with tools and history around it: 64 bytes per
// context token (a CJK character escapes to 6 bytes and takes about a token), over a floor of 1 MiB.
size_t default_max_body_bytes(int64_t max_context);

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();
  // Binds and serves on a thread of its own; throws Error when the address cannot be bound. Until
  // launch(), /health answers 503 with the phase and /v1/* answer 503.
  void start();
  // The countdown phase before launch ("upright", "fuel", "static_fire"), reported by /health.
  void set_phase(std::string phase);
  // The body GET /handshake answers from now on (boosters/handshake.h); 503 until then.
  void set_handshake(std::string json);
  // Launch: phase "launch", /health 200, and requests go to `loop` from now on.
  // REQUIRES: `loop` outlives the server's serving (stop() or destruction).
  void launch(EngineLoop& loop);
  // Blocks until no completion is being answered (a stream has written its last event), or until
  // `timeout`; false then. A drain calls it between the loop's last answer and stop(), which would cut
  // a stream short.
  bool wait_responses(std::chrono::milliseconds timeout);
  // Blocks until stop().
  void wait();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rocket
