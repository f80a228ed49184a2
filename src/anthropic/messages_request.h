// The body of POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API: Claude Code
// and the Anthropic SDKs), translated into the chat request it asks for:
//
//   system (a string or text blocks)       -> a system message, first
//   messages[i] role system                -> a system message where it stands (Claude Code's
//                                             mid-conversation context)
//   user: text blocks                      -> a user message
//   user: image blocks (base64)            -> image_url parts of it with their data: URLs, in order
//                                             among its text (a url source is refused: nothing is
//                                             fetched)
//   user: tool_result blocks               -> tool messages (before the user's text, as Anthropic
//                                             orders them), their content's text, or its text and
//                                             image parts where it holds an image block; a
//                                             tool_reference block in one offers that deferred tool
//                                             from then on
//   assistant: text, tool_use, thinking    -> one assistant turn: content, tool calls (input as the
//                                             arguments' JSON), reasoning_content (a thinking block
//                                             signed by this server opens from its signature, so an
//                                             "omitted" block still renders its reasoning)
//   tools {name, description, input_schema} -> function tools; defer_loading tools are offered only
//                                             once a tool_reference names them; server tools (web
//                                             search, web fetch, code execution, tool search) are
//                                             not offered, and the answer's usage.server_tool_use
//                                             counts no use of them
//   tool_choice auto/any/tool/none         -> auto/required/the function/none, and
//                                             disable_parallel_tool_use -> parallel_tool_calls false
//   thinking {type: enabled | disabled | adaptive, budget_tokens, display}
//                                          -> chat_template_kwargs.enable_thinking (adaptive: the
//                                             template's default); display "omitted" answers thinking
//                                             blocks with their text in the signature alone
//   output_config {effort, format}         -> reasoning_effort where the template reads one (else it
//                                             changes no token), response_format json_schema
//   context_management.edits               -> applied to the chat messages (apply_context_edits)
//   stop_sequences, max_tokens, temperature, top_p, top_k -> chat's
//   metadata.user_id, service_tier, cache_control marks -> recorded on the request's span
//
// and goes through parse_chat_request, so every knob is checked as chat checks it. Documents, images
// in an assistant turn,
// Anthropic-defined client tools (bash, text editor, computer, memory) and MCP servers are refused by
// name: this server runs text and client tools with their own schemas only. thinking.budget_tokens is
// checked (below max_tokens, as Anthropic requires) and recorded, not enforced: the reasoning ends
// where the model ends it, within max_tokens (closing it at the budget needs the scheduler's
// generation to force the template's end of reasoning).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai/openai_request.h"
#include "openai/protocol_error.h"

namespace rocket {

// clear_thinking_20251015: the reasoning of all but the last `keep_turns` assistant turns that have
// some is dropped from the prompt (nullopt: keep "all", the prompt unchanged).
struct ClearThinking {
  std::optional<int64_t> keep_turns = 1;
};

// clear_tool_uses_20250919: once the prompt passes the trigger, the oldest tool results (all but the
// last `keep`, none of `exclude_tools`) are replaced by a placeholder, their calls' inputs too where
// clear_tool_inputs says so; an edit that would clear fewer than `clear_at_least` tokens is not made.
struct ClearToolUses {
  enum class Trigger { kInputTokens, kToolUses };
  Trigger trigger = Trigger::kInputTokens;
  int64_t trigger_value = 100000;
  int64_t keep = 3;
  int64_t clear_at_least = 0;
  std::set<std::string, std::less<>> exclude_tools;
  bool clear_all_inputs = false;
  std::set<std::string, std::less<>> clear_inputs_of;  // clear_tool_inputs as a list of tool names
};

struct MessagesRequest {
  CompletionRequest chat;  // what the engine runs
  // context_management.edits, in the order given (each one of the two is set where listed).
  struct Edit {
    std::optional<ClearThinking> thinking;
    std::optional<ClearToolUses> tool_uses;
  };
  std::vector<Edit> edits;
  bool context_management = false;  // the request had context_management: the answer reports it
  bool omit_thinking = false;       // thinking.display "omitted"
  std::vector<std::string> server_tools;  // the types of server tools not offered to the model
};

// Throws ProtocolError (400) on the first invalid or unsupported field; 413 for an image over
// `images.max_bytes`. `count_tokens`: the body of /v1/messages/count_tokens, which has no max_tokens.
MessagesRequest parse_messages_request(const nlohmann::ordered_json& body, bool count_tokens = false,
                                       const ImageBounds& images = {});

// Applies r.edits to r.chat.messages as Anthropic documents context editing: the edits run in order,
// each on what the one before left. `count` is the prompt's length in tokens as the engine would
// build it (EngineLoop::report_prefix), asked only where an edit needs it (an input_tokens trigger,
// clear_at_least, and the tokens an edit cleared). Returns context_management.applied_edits: one
// entry per edit that cleared something ({type, cleared_thinking_turns | cleared_tool_uses,
// cleared_input_tokens}).
nlohmann::ordered_json apply_context_edits(MessagesRequest& r,
                                           const std::function<int64_t(const CompletionRequest&)>& count);

// The text a cleared tool result reads as.
inline constexpr const char* kClearedToolResult = "[tool result cleared to save context]";

// Anthropic's error shape: {"type": "error", "error": {"type": "invalid_request_error", "message"}},
// the type from the status (401 authentication_error, 404 not_found_error, 413 request_too_large,
// 429 rate_limit_error, 503 overloaded_error, other 5xx api_error); the message names the field.
nlohmann::ordered_json messages_error_body(const ProtocolError& e);

}  // namespace rocket
