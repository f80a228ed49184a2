// The OpenAI-compatible HTTP front (issue 4, first cut): an HttpServer whose HTTP threads parse and
// answer requests, and an EngineLoop that owns the engine on one thread of its own. HTTP threads never
// touch the engine: they submit() a request (rendered and tokenised on the HTTP thread, which needs
// only the thread-safe Tokenizer and ChatTemplate), the loop thread runs it, and the tokens come back
// by request id through the request's RequestSink (llama.cpp server style).
//
// FifoEngineLoop is the simple loop the issue allows until the scheduler lands: a bounded FIFO queue,
// one request at a time in slot 0, behind the same EngineLoop interface. The forward pass it drives is
// a TokenEngine, which each engine binary implements (src/engine/host/main.cc `serve`), so this file
// has no engine dependency and lives in librocket. The per-request output side (sampling, detokenising,
// stop strings, usage, the RequestSink) is a Generation (serve/generation.h), shared with the scheduler.
//
// Not yet here (issue 4): logprobs (refused with a 400 naming it), tool_choice required/named and
// parallel_tool_calls=false enforcement, a countdown phase in /health, concurrent streams, prefix
// cache (cached_tokens is always 0).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/chat_template.h"
#include "serve/generation.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/tokenizer.h"

namespace rocket {

struct ModelInfo {
  std::string id;                    // the engine directory's name
  nlohmann::ordered_json metadata;   // fingerprint, plan limits: shown by GET /v1/models
};

struct Submitted {
  uint64_t id = 0;
  int64_t prompt_tokens = 0;
  bool reasoning_open = false;  // the rendered prompt ends inside <think>
};

class EngineLoop {
 public:
  virtual ~EngineLoop() = default;
  virtual const ModelInfo& model() const = 0;
  // Called on an HTTP thread. Prepares the prompt and queues the request; its events arrive on
  // `sink`. Throws ProtocolError: 400 when the prompt (+ max_tokens) exceeds the context or cannot be
  // rendered, 503 when the queue is full.
  virtual Submitted submit(const CompletionRequest& request, std::shared_ptr<RequestSink> sink) = 0;
};

// The forward pass a FifoEngineLoop drives; called on the loop thread only.
class TokenEngine {
 public:
  virtual ~TokenEngine() = default;
  virtual int vocab() const = 0;           // logits per row
  virtual int64_t max_context() const = 0;
  // A fresh sequence: runs `ids` from position 0; returns the last position's logits.
  virtual const float* prefill(const std::vector<int32_t>& ids) = 0;
  // Runs `id` at `pos` of the current sequence; returns its logits.
  virtual const float* decode(int32_t id, int64_t pos) = 0;
};

// The end-of-sequence ids of ENGINE_DIR/generation_config.json (none when the file is absent).
std::vector<int32_t> eos_token_ids(const std::string& engine_dir);

class FifoEngineLoop : public EngineLoop {
 public:
  // Loads ENGINE_DIR's tokenizer.json, compiles tokenizer_config.json's chat_template and reads the
  // eos ids of generation_config.json; starts the loop thread. `engine` must outlive the loop.
  FifoEngineLoop(const std::string& engine_dir, TokenEngine& engine, ModelInfo model, size_t queue_capacity = 16);
  ~FifoEngineLoop() override;

  const ModelInfo& model() const override { return model_; }
  Submitted submit(const CompletionRequest& request, std::shared_ptr<RequestSink> sink) override;

  // The prompt text a chat request renders to (for tests and logs).
  std::string render_chat(const CompletionRequest& request) const;

 private:
  struct Job {
    uint64_t id;
    std::vector<int32_t> prompt;
    int64_t max_tokens;
    CompletionRequest request;
    std::shared_ptr<RequestSink> sink;
  };
  void run();

  TokenEngine& engine_;
  ModelInfo model_;
  size_t capacity_;
  Tokenizer tokenizer_;
  std::optional<ChatTemplate> template_;
  nlohmann::ordered_json template_vars_;  // bos_token, eos_token
  std::vector<int32_t> eos_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;  // non-empty: /v1/* requires "Authorization: Bearer <key>"
};

class HttpServer {
 public:
  HttpServer(EngineLoop& loop, ServerOptions options);
  ~HttpServer();
  // Binds and serves until stop(); throws Error when the address cannot be bound.
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rocket
