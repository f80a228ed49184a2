// PromptBuilder: a request's prompt, as the engine will see it. Renders chat messages with the fuel's
// chat template, tokenises, and checks the result against the plan's context, so that everything that
// can be refused is refused on the HTTP thread with a 400 before the request is queued.
//
// tool_choice "required" or a named function: the prompt ends with the opening of a tool call
// (forced_opening), so the model's turn continues a call it cannot decline, and the output parser
// starts as if it had read that opening; where the engine masks its picks the rest of the call is
// generated under the tool-call grammar too (grammar/tool_calls.h), primed with the same opening.
//
// Thread safety: const methods may run concurrently (the Tokenizer and ChatTemplate are immutable).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai/openai_request.h"
#include "openai/tool_call_format.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rocket {

struct Prompt {
  std::vector<int32_t> ids;
  int64_t max_tokens = 0;       // the request's, or what is left of the context
  // Chat: the chat template's rendering ends inside <think> (before any forced opening), so the
  // output parser starts in reasoning.
  bool reasoning_open = false;
  ToolCallFormat tool_call_format = ToolCallFormat::kJson;  // the fuel's, for the output parser
};

class PromptBuilder {
 public:
  // Loads ENGINE_DIR's tokenizer.json, compiles tokenizer_config.json's chat_template (when there is
  // one) and reads generation_config.json's eos ids.
  explicit PromptBuilder(const std::string& engine_dir);

  // Throws ProtocolError 400 naming the field: no chat template, a conversation the template
  // refuses, token ids outside [0, vocab), an empty prompt, prompt (+ max_tokens) over max_context.
  Prompt build(const CompletionRequest& request, int vocab, int64_t max_context) const;
  // The text the chat template renders a chat request to, with its generation prompt; build()
  // appends forced_opening() to it.
  std::string render_chat(const CompletionRequest& request) const;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const std::vector<int32_t>& eos() const { return eos_; }
  // Read from the chat template (tool_call_format_of); kJson without one.
  ToolCallFormat tool_call_format() const { return tool_call_format_; }

 private:
  Tokenizer tokenizer_;
  std::optional<ChatTemplate> template_;
  nlohmann::ordered_json template_vars_;  // bos_token, eos_token
  std::vector<int32_t> eos_;
  ToolCallFormat tool_call_format_ = ToolCallFormat::kJson;
  bool template_reads_reasoning_effort_ = false;  // the template names the variable
};

// The start of the assistant's turn that the request's tool_choice forces, in Qwen's tool-call format
// as the fuel's chat template renders an assistant's call ('<tool_call>\n{"name": "NAME", "arguments":
// ARGS}\n</tool_call>'): "required" opens a call up to its name, a named function up to its
// arguments. Empty for auto, none and completions. `reasoning_open`: the rendered prompt ends inside
// <think>; the opening then closes the reasoning first, so that the call is the answer.
// The prompt ends with this text (tokenised with it) and the output parser is primed with it: both
// derive it here, so they agree.
std::string forced_opening(const CompletionRequest& request, bool reasoning_open,
                           ToolCallFormat format = ToolCallFormat::kJson);

// The end-of-sequence ids of ENGINE_DIR/generation_config.json (none when the file is absent).
std::vector<int32_t> eos_token_ids(const std::string& engine_dir);

}  // namespace rocket
