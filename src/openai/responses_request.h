// The body of POST /v1/responses (OpenAI's Responses API: the OpenAI Agents SDK's default, Codex's
// wire API), translated into the chat request it asks for. `instructions` and the `input` items
// become chat messages:
//
//   instructions                          -> a system message, first
//   input (a string)                      -> a user message
//   message {role, content}               -> a message; input_text, output_text and refusal parts keep
//                                            their text, input_image parts (a user message's) become
//                                            chat's image_url parts, any other part is refused
//   reasoning {content | summary | encrypted_content}
//                                         -> reasoning_content of the assistant turn that follows it
//                                            (encrypted_content this server sealed opens back into
//                                            the reasoning: sealed_reasoning.h)
//   function_call {call_id, name, args}   -> a tool call of the assistant turn (consecutive calls, and
//                                            calls right after an assistant message, share one turn)
//   function_call_output {call_id, ...}   -> a tool message
//
// and the function tools (those of a `namespace` tool flattened into the list, under their own
// names), `tool_choice`, `text.format`, `reasoning.effort` and `max_output_tokens` become chat's
// tools, tool_choice, response_format, reasoning_effort and max_completion_tokens. The chat request
// then goes through parse_chat_request, so every knob is checked exactly as chat checks it; an error
// names the field as the Responses request spells it.
// Nothing is stored: previous_response_id, conversation and item references are refused (send the
// whole conversation in `input`); store: false is what every response says. Hosted tools (web search,
// file search, code interpreter, image generation, computer use, MCP) are not offered to the model:
// the response's `tools` lists what it was offered. Bookkeeping (client_metadata, prompt_cache_key,
// metadata, store, service_tier, safety_identifier, reasoning.summary) is recorded on the span.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "openai/openai_request.h"
#include "openai/protocol_error.h"

namespace rocket {

struct ResponsesRequest {
  CompletionRequest chat;  // what the engine runs
  // include has "reasoning.encrypted_content": reasoning items carry it (sealed_reasoning.h).
  bool encrypted_reasoning = false;
  // The namespace of each function tool that came from a `namespace` tool: its calls name it.
  std::map<std::string, std::string, std::less<>> namespace_of;
  // The request's settings a response object repeats: instructions, max_output_tokens, metadata,
  // parallel_tool_calls, reasoning, temperature, text, tool_choice, tools, top_p, truncation, user.
  nlohmann::ordered_json echo;
};

// Throws ProtocolError (400) on the first invalid or unsupported field; 413 for an image over
// `images.max_bytes`.
ResponsesRequest parse_responses_request(const nlohmann::ordered_json& body, const ImageBounds& images = {});

// An error about the translated chat request (the prompt builder's, the scheduler's) as the Responses
// request names its fields: max_completion_tokens is max_output_tokens, messages is input, ...
ProtocolError responses_error(const ProtocolError& chat_error);

}  // namespace rocket
