// The answer of POST /v1/messages, built from the output parser's events: the `message` object and
// the stream's events, as Anthropic writes them. One state machine serves both forms, so a whole
// message is exactly what the stream's events add up to.
//
// Content blocks, in the order the model produced them:
//   {type: "thinking", thinking, signature}       (signature: the reasoning sealed (sealed_reasoning.h),
//                                                  which the next turn opens; with thinking.display
//                                                  "omitted" the text is "" and the signature all)
//   {type: "text", text}
//   {type: "tool_use", id, name, input: {…}}      (input: the call's arguments object)
// A stream is:
//   message_start                                  (content [], usage.input_tokens)
//   per block: content_block_start, content_block_delta … (thinking_delta, text_delta,
//              input_json_delta; a thinking block ends with its signature_delta), content_block_stop
//   message_delta {stop_reason, stop_sequence, usage, context_management}, message_stop
// stop_reason: tool_use when the turn called a tool, max_tokens at the limit, stop_sequence (with
// the string) at one of stop_sequences, else end_turn. usage, as Anthropic counts a prompt in three
// parts: cache_read_input_tokens, what the prefix cache served; cache_creation_input_tokens, what of
// the rest it keeps for the next request (the prompt's whole pages: the cache holds every prompt's
// full pages, marked by cache_control or not); input_tokens, the remainder. server_tool_use counts no
// use of the server tools the request named (none is offered to the model).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai/openai_response.h"
#include "openai/output_parser.h"

namespace rocket {

struct MessagesStreamOptions {
  bool omit_thinking = false;  // thinking.display "omitted"
  int64_t page_tokens = 0;     // the prefix cache's page (0: it keeps nothing for later)
  // context_management.applied_edits of the request's edits; null: the request had no context_management.
  nlohmann::ordered_json applied_edits;
  bool server_tools = false;   // the request named server tools: usage.server_tool_use
};

class MessagesStream {
 public:
  using Options = MessagesStreamOptions;
  // `prompt_tokens`: the prompt's length, which message_start reports before the cache's share is known.
  MessagesStream(std::string id, std::string model, int64_t prompt_tokens, Options options = {});

  std::vector<nlohmann::ordered_json> start();
  std::vector<nlohmann::ordered_json> on(const OutputEvent& event);
  // `stop`: the stop string that ended the output, if one did; `tool_calls`: the turn called tools.
  std::vector<nlohmann::ordered_json> finish(FinishReason finish, const std::string& stop, bool tool_calls,
                                             const Usage& usage);

  // The message as of the last call (after finish(): the whole message).
  const nlohmann::ordered_json& message() const { return message_; }

 private:
  enum class Open { kNone, kThinking, kText, kToolUse };
  void close(std::vector<nlohmann::ordered_json>& out);

  nlohmann::ordered_json usage(const Usage& u) const;

  Options options_;
  nlohmann::ordered_json message_;
  Open open_ = Open::kNone;
  std::string thinking_;   // the open thinking block's reasoning so far
  std::string arguments_;  // the open tool_use block's input JSON so far
};

}  // namespace rocket
