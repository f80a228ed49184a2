// The body of POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API: Claude Code
// and the Anthropic SDKs), translated into the chat request it asks for:
//
//   system (a string or text blocks)       -> a system message, first
//   user: text blocks                      -> a user message
//   user: tool_result blocks               -> tool messages (before the user's text, as Anthropic
//                                             orders them), their content's text
//   assistant: text, tool_use, thinking    -> one assistant turn: content, tool calls (input as the
//                                             arguments' JSON), reasoning_content
//   tools {name, description, input_schema} -> function tools; tool_choice auto/any/tool/none ->
//                                             auto/required/the function/none, and
//                                             disable_parallel_tool_use -> parallel_tool_calls false
//   thinking {type: enabled | disabled}    -> chat_template_kwargs.enable_thinking
//   stop_sequences, max_tokens, temperature, top_p, top_k, metadata.user_id -> chat's
//
// and goes through parse_chat_request, so every knob is checked as chat checks it. Images, documents,
// server tools (web search, code execution, ...) and MCP servers are refused: this server runs text
// and client tools only. thinking.budget_tokens is read (it must be below max_tokens, as Anthropic
// requires) but not enforced: the reasoning ends where the model ends it, within max_tokens.
// cache_control marks are accepted and need nothing: the prefix cache keeps every prompt's pages.
#pragma once

#include <nlohmann/json.hpp>

#include "openai/openai_request.h"
#include "openai/protocol_error.h"

namespace rocket {

// Throws ProtocolError (400) on the first invalid or unsupported field. `count_tokens`: the body of
// /v1/messages/count_tokens, which has no max_tokens.
CompletionRequest parse_messages_request(const nlohmann::ordered_json& body, bool count_tokens = false);

// Anthropic's error shape: {"type": "error", "error": {"type": "invalid_request_error", "message"}},
// the type from the status (401 authentication_error, 404 not_found_error, 413 request_too_large,
// 429 rate_limit_error, 503 overloaded_error, other 5xx api_error); the message names the field.
nlohmann::ordered_json messages_error_body(const ProtocolError& e);

}  // namespace rocket
