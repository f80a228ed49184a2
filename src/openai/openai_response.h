// The response objects of the chat and completions endpoints, field for field as OpenAI writes them:
// `chat.completion`, `chat.completion.chunk`, `text_completion` (OpenAI streams completions as
// `text_completion` objects too), usage, and logprobs. Plain builders of JSON values: the server
// decides what to send when, sse.h frames it.
//
// A streamed chat response is, in order:
//   chat_chunk_json(meta, chat_role_delta())                 role, content ""
//   chat_chunk_json(meta, chat_event_delta(event)) …         one per OutputParser event
//   chat_chunk_json(meta, json::object(), finish_reason)     empty delta, finish_reason
//   chat_usage_chunk_json(meta, usage)                       only with stream_options.include_usage
//   kSseDone
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai/openai_request.h"
#include "openai/output_parser.h"

namespace rocket {

enum class FinishReason { kStop, kLength, kToolCalls };
std::string_view finish_reason_name(FinishReason reason);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};
// {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens}}
nlohmann::ordered_json usage_json(const Usage& usage);

// What every object of one response shares.
struct ResponseMeta {
  std::string id;  // "chatcmpl-…" or "cmpl-…" (random_id)
  int64_t created = 0;  // Unix seconds
  std::string model;
  std::string system_fingerprint;  // empty = omitted
  bool stream_usage = false;  // stream_options.include_usage: every chunk carries "usage": null
  int choice = 0;  // the index of the choice an object below carries (n > 1: one meta per choice)
};

// One sampled token and the most likely alternatives at its position.
struct TokenLogprob {
  std::string bytes;  // the token's raw bytes (may be part of a UTF-8 character)
  double logprob = 0;
  std::vector<std::pair<std::string, double>> top;  // (bytes, logprob), most likely first
};

// Chat form: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], "refusal":
// null}. `token` is the bytes as UTF-8 with ill-formed parts as U+FFFD; `bytes` the exact bytes.
nlohmann::ordered_json chat_logprobs_json(std::span<const TokenLogprob> tokens);
// Completions form: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}; each
// top_logprobs entry holds the sampled token too, as OpenAI's does (up to logprobs + 1 entries).
// `text_offset` is the offset of the first token in the choice's text, in code points of the token
// texts (Python's str offsets, as OpenAI's clients read them); it is advanced past these tokens.
nlohmann::ordered_json completion_logprobs_json(std::span<const TokenLogprob> tokens, int64_t& text_offset);

// An assistant turn assembled from OutputParser events, for non-streamed responses.
struct AssistantTurn {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;

  void add(const OutputEvent& event);
};

// Non-streamed chat: {id, object: "chat.completion", created, model, choices: [{index, message,
// logprobs, finish_reason}], usage}. The message's content is null when it is empty and the turn
// makes tool calls, as OpenAI writes it; reasoning_content and tool_calls appear when non-empty.
// `logprobs`: chat_logprobs_json or null.
nlohmann::ordered_json chat_completion_json(const ResponseMeta& meta, const AssistantTurn& turn, FinishReason finish,
                                            const Usage& usage, const nlohmann::ordered_json& logprobs = nullptr);

// One chunk: {id, object: "chat.completion.chunk", created, model, choices: [{index, delta, logprobs,
// finish_reason}]} (+ "usage": null with meta.stream_usage).
nlohmann::ordered_json chat_chunk_json(const ResponseMeta& meta, nlohmann::ordered_json delta,
                                       std::optional<FinishReason> finish = std::nullopt,
                                       const nlohmann::ordered_json& logprobs = nullptr);
// The first delta: {"role": "assistant", "content": ""}.
nlohmann::ordered_json chat_role_delta();
// {"content"}, {"reasoning_content"}, or {"tool_calls": [{index, id, type, function: {name,
// arguments: ""}}]} then {"tool_calls": [{index, function: {arguments}}]}.
nlohmann::ordered_json chat_event_delta(const OutputEvent& event);
// The usage chunk that ends a stream with include_usage: "choices": [] and the usage.
nlohmann::ordered_json chat_usage_chunk_json(const ResponseMeta& meta, const Usage& usage);

// Non-streamed completion: {id, object: "text_completion", created, model, choices: [{text, index,
// logprobs, finish_reason}], usage}. `logprobs`: completion_logprobs_json or null.
nlohmann::ordered_json completion_json(const ResponseMeta& meta, std::string_view text, FinishReason finish,
                                       const Usage& usage, const nlohmann::ordered_json& logprobs = nullptr);
nlohmann::ordered_json completion_chunk_json(const ResponseMeta& meta, std::string_view text,
                                             std::optional<FinishReason> finish = std::nullopt,
                                             const nlohmann::ordered_json& logprobs = nullptr);
nlohmann::ordered_json completion_usage_chunk_json(const ResponseMeta& meta, const Usage& usage);

}  // namespace rocket
