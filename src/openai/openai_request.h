// The body of POST /v1/chat/completions and POST /v1/completions, parsed and validated field for
// field against OpenAI's API reference, before anything reaches the engine.
//
// Policy (docs/doctrine.md: a knob the plan did not compile gets a 400 naming it):
//  - a field of the wrong type or out of range: 400, `param` = the field's path;
//  - a field the engine cannot honour (best_of, echo, suffix, audio, ...): accepted at its neutral
//    value, otherwise 400
//    naming it, so a client never gets output silently produced without the knob it asked for;
//  - bookkeeping fields that cannot change the output (user, store, metadata, service_tier,
//    prompt_cache_key, safety_identifier): type-checked and accepted;
//  - any other field: 400 "Unrecognized request argument", as OpenAI answers;
//  - null means "not given" for every optional field, as in OpenAI's schema.
// Checks that need the engine (model name, prompt length against the plan's context, token ids
// against the vocabulary) are the server's.
//
// The parsers take nlohmann::ordered_json: tool schemas are rendered into the prompt by the chat
// template with `tojson`, and HF renders them in the client's key order; a sorted-key json would
// change the prompt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sampling_history.h"
#include "openai/image_input.h"
#include "openai/protocol_error.h"
#include "telemetry/trace_context.h"

namespace rocket {

// A function call made by the assistant: in a request's history, or parsed from the output.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object's text, as OpenAI carries it (checked to be one)
};

struct ChatMessage {
  // system, developer, user, assistant or tool, as the client sent it. "developer" is OpenAI's newer
  // name for system; mapping it is the chat template's business.
  std::string role;
  // Text parts of an array content are joined with '\n' (as vLLM does). Null only for an assistant
  // message that makes tool calls.
  std::optional<std::string> content;
  // A user message with images (or a tool message with images: a Responses function_call_output's or
  // an Anthropic tool_result's): its content parts in order, text (`image` -1) and images (`image`
  // indexes CompletionRequest::images), which the chat template places (Qwen3.5's render_content
  // writes <|vision_start|><|image_pad|><|vision_end|> per image, inside <tool_response> for a tool
  // message). Empty for a text-only message; `content` holds the text parts joined either way.
  struct Part {
    std::string text;
    int image = -1;
  };
  std::vector<Part> parts;
  std::string name;                // optional participant name
  std::string reasoning_content;   // an assistant turn's reasoning, sent back by some clients
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id;          // tool
};

// A function the model may call. Only "function" tools exist in this engine.
struct Tool {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters;  // a JSON Schema object; null when not given
  // true: under tool_choice auto, a call of this tool is generated under a grammar of `parameters`
  // (grammar/tool_calls.h) on an engine that masks its picks; elsewhere parsed, not enforced.
  bool strict = false;
};

struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kFunction };
  Mode mode = Mode::kAuto;
  std::string function;  // kFunction: the name, one of the request's tools
};

// response_format: text, any JSON object, or JSON following a schema (src/grammar compiles it; the
// schema was compiled once while parsing, so a schema outside the subset is a 400 naming its path).
struct ResponseFormat {
  enum class Kind { kText, kJsonObject, kJsonSchema };
  Kind kind = Kind::kText;
  std::string name;               // kJsonSchema: json_schema.name
  nlohmann::ordered_json schema;  // kJsonSchema: json_schema.schema ({} when absent: any JSON value)
};

struct CompletionRequest {
  enum class Kind { kChat, kCompletion };
  Kind kind = Kind::kChat;

  std::string model;
  std::vector<ChatMessage> messages;                        // chat
  // Chat: every image of the conversation, in message order (a message's parts index it), bounded by
  // the server's ImageBounds while parsing.
  std::vector<ImageInput> images;
  std::variant<std::string, std::vector<int32_t>> prompt;  // completions: text or token ids

  // max_completion_tokens, else max_tokens. Absent in chat = up to the context; OpenAI's default for
  // completions is 16.
  std::optional<int64_t> max_tokens;
  double temperature = 1.0;  // [0, 2]; 0 = greedy
  double top_p = 1.0;        // (0, 1]
  int top_k = 0;             // not OpenAI (vLLM's extension); 0 or -1 = off
  std::optional<int64_t> seed;     // choice i draws with seed + i
  std::vector<std::string> stop;  // at most 4, none empty
  double min_p = 0.0;              // [0, 1]; not OpenAI (vLLM's extension)
  double presence_penalty = 0.0;   // [-2, 2]
  double frequency_penalty = 0.0;  // [-2, 2]
  double repetition_penalty = 1.0; // > 0; not OpenAI (vLLM's extension); 1 = off
  // At most kMaxLogitBias distinct tokens, ascending, biases in [-100, 100]; the server checks the
  // tokens against the vocabulary.
  std::vector<LogitBias> logit_bias;
  // vLLM's extensions, which benchmark clients send (SGLang's bench_serving sends ignore_eos by
  // default): ignore_eos, eos is a token like any other (no text; a structured output still ends at
  // its grammar's end); min_tokens, eos is masked out of the first min_tokens picks and stop strings
  // are not looked for in them (the server checks min_tokens <= max_tokens).
  bool ignore_eos = false;
  int64_t min_tokens = 0;
  // The most tokens the reasoning may take before the server closes it with </think> (Anthropic's
  // thinking.budget_tokens); -1: as many as the model writes.
  int64_t reasoning_budget = -1;
  int64_t n = 1;  // choices, forked from one prefill; the server bounds it by the plan's streams
  // Rocket's extension: false keeps a drafting engine from speculating for this request (its output is
  // the same either way: docs/speculative.md); absent: the engine's default, on.
  std::optional<bool> speculative;

  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage

  bool logprobs = false;
  int top_logprobs = 0;  // chat: [0, 20]; completions: `logprobs` as an integer, [0, 5]

  std::vector<Tool> tools;
  // Default auto (none when there are no tools, which is the same). Required or a named function:
  // the prompt ends with the opening of the call (forced_opening, openai/prompt_builder.h), and a
  // named function allows one call.
  ToolChoice tool_choice;
  // false: the turn ends at its first tool call, and the engine stops there (http/server.cc).
  bool parallel_tool_calls = true;

  // The client's W3C traceparent header, which the request's spans continue: set by the server from
  // the header, never from the body.
  std::optional<TraceContext> trace_parent;

  // Chat only. Not text: the answer (after any reasoning) is generated under the format's grammar.
  ResponseFormat response_format;

  std::string user;
  // chat_template_kwargs.enable_thinking; unset = the template's default.
  std::optional<bool> enable_thinking;
  // Every chat_template_kwargs key (enable_thinking too), as vLLM and SGLang pass them: variables of
  // the chat template (preserve_thinking, ...). Null values are left out (the template's default).
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  // none | minimal | low | medium | high: a template variable when the fuel's template reads it
  // (the prompt builder refuses it otherwise).
  std::optional<std::string> reasoning_effort;
  // The effort is a hint (the Messages API's output_config.effort, which Claude Code sends every
  // turn): a template that does not read reasoning_effort renders without it instead of refusing.
  bool reasoning_effort_hint = false;

  // What the client sent that changes no token (metadata, prompt_cache_key, store, service_tier,
  // cache_control marks, client_metadata, the agent's session headers): recorded on the request's
  // span as `rocket.client.<name>` attributes (telemetry/otlp_json.h), in the order given.
  std::vector<std::pair<std::string, std::string>> client_attributes;
};

// How deeply a request's JSON may nest (objects and arrays), checked while parsing: every later walk
// over client data (JSON -> template values, tojson, the tool schemas) is recursive, so this bounds
// their stack on the HTTP thread. OpenAI-shaped requests nest a few levels; tool parameter schemas a
// dozen or two.
constexpr int kDefaultMaxJsonDepth = 64;

// Parses the text of a request body; malformed JSON, a non-object or nesting deeper than `max_depth`
// is a 400.
nlohmann::ordered_json parse_json_body(std::string_view body, int max_depth = kDefaultMaxJsonDepth);

// Throw ProtocolError (status 400) on the first invalid or unsupported field; 413 for an image over
// `images.max_bytes`. Chat Completions' tool messages hold text parts only (OpenAI's API);
// `tool_result_images` lets a tool message hold image parts too, for the Responses and Messages
// translations, whose tool results carry images.
CompletionRequest parse_chat_request(const nlohmann::ordered_json& body, const ImageBounds& images = {},
                                     bool tool_result_images = false);
CompletionRequest parse_completion_request(const nlohmann::ordered_json& body);

}  // namespace rocket
