// EngineLoop: what the HTTP front needs from whatever runs requests, implemented by the
// continuous-batching Scheduler (scheduler/scheduler.h). The HTTP threads call submit(); the loop
// owns the engine on a thread of its own, and a request's events come back through its RequestSink
// (scheduler/generation.h). Lives here, below http/, so that the scheduler never includes the server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "openai/openai_request.h"
#include "openai/tool_call_format.h"
#include "scheduler/generation.h"

namespace rocket {

struct ModelInfo {
  std::string id;                    // the engine directory's name
  nlohmann::ordered_json metadata;   // fingerprint, plan limits: shown by GET /v1/models
};

// Whether the loop still serves, for GET /health and for refusing new requests.
struct LoopState {
  enum class Status { kServing, kDraining, kFailed };
  Status status = Status::kServing;
  std::string reason;  // kFailed: the engine's error
};

struct Submitted {
  uint64_t id = 0;
  int64_t prompt_tokens = 0;
  bool reasoning_open = false;  // the rendered prompt ends inside <think>
  ToolCallFormat tool_call_format = ToolCallFormat::kJson;  // how the fuel's model writes tool calls
};

// What a replica tells the replicated front about one request before the front routes it
// (POST /prefix/v1/...; front/route.h): how much of its prompt this replica's prefix cache holds, and
// how busy the replica is.
struct PrefixReport {
  int64_t prompt_tokens = 0;
  // The longest page-aligned prefix whose KV pages the cache holds (RadixCache::cached_prefix), as
  // admission caps it (at least the last token computed). The front routes on this rather than on
  // `resumable_tokens`: where a shared prefix ends inside another sequence's edge (a system prompt
  // that conversations continue differently) nothing resumes there yet, but this replica is the one
  // that captures the branch point on admission, so the next request sharing it resumes.
  int64_t cached_tokens = 0;
  int64_t resumable_tokens = 0;  // what admission would resume from now (RadixCache::match)
  int running = 0, waiting = 0;
};

class EngineLoop {
 public:
  virtual ~EngineLoop() = default;
  virtual const ModelInfo& model() const = 0;
  // Called on an HTTP thread. Prepares the prompt and queues the request; its events arrive on
  // `sink`. Throws ProtocolError: 400 when the prompt (+ max_tokens) exceeds the context or cannot be
  // rendered, 503 when the queue is full, the loop is draining or its engine has failed.
  virtual Submitted submit(const CompletionRequest& request, std::shared_ptr<RequestSink> sink) = 0;
  // Any thread.
  virtual LoopState state() const = 0;
  // Counters for GET /stats (requests, tokens, cache pages) and the load gauges of GET /metrics; any thread.
  virtual nlohmann::ordered_json stats() const = 0;
  // Called on an HTTP thread: renders and tokenises `request` as submit() would and reports how much
  // of it the prefix cache holds, changing nothing (no LRU touch, no lock, no pages). Throws
  // ProtocolError as submit() does for a prompt it cannot build, and 503 while draining or failed.
  virtual PrefixReport report_prefix(const CompletionRequest& request) = 0;
};

}  // namespace rocket
