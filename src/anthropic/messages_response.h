// The answer of POST /v1/messages, built from the output parser's events: the `message` object and
// the stream's events, as Anthropic writes them. One state machine serves both forms, so a whole
// message is exactly what the stream's events add up to.
//
// Content blocks, in the order the model produced them:
//   {type: "thinking", thinking, signature: ""}   (the reasoning, unsigned: this server signs nothing)
//   {type: "text", text}
//   {type: "tool_use", id, name, input: {…}}      (input: the call's arguments object)
// A stream is:
//   message_start                                  (content [], usage.input_tokens)
//   per block: content_block_start, content_block_delta … (thinking_delta, text_delta,
//              input_json_delta), content_block_stop
//   message_delta {stop_reason, stop_sequence, usage}, message_stop
// stop_reason: tool_use when the turn called a tool, max_tokens at the limit, stop_sequence (with
// the string) at one of stop_sequences, else end_turn. usage: input_tokens are the prompt tokens the
// prefix cache did not serve, cache_read_input_tokens those it did (Anthropic counts them apart).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai/openai_response.h"
#include "openai/output_parser.h"

namespace rocket {

class MessagesStream {
 public:
  // `prompt_tokens`: the prompt's length, which message_start reports before the cache's share is known.
  MessagesStream(std::string id, std::string model, int64_t prompt_tokens);

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

  nlohmann::ordered_json message_;
  Open open_ = Open::kNone;
  std::string arguments_;  // the open tool_use block's input JSON so far
};

}  // namespace rocket
