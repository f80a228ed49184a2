// PromptBuilder: a request's prompt, as the engine will see it. Renders chat messages with the fuel's
// chat template, tokenises, and checks the result against the plan's context, so that everything that
// can be refused is refused on the HTTP thread with a 400 before the request is queued.
//
// Thread safety: const methods may run concurrently (the Tokenizer and ChatTemplate are immutable).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/chat_template.h"
#include "serve/openai_request.h"
#include "serve/tokenizer.h"

namespace rocket {

struct Prompt {
  std::vector<int32_t> ids;
  int64_t max_tokens = 0;       // the request's, or what is left of the context
  bool reasoning_open = false;  // the rendered prompt ends inside <think>
};

class PromptBuilder {
 public:
  // Loads ENGINE_DIR's tokenizer.json, compiles tokenizer_config.json's chat_template (when there is
  // one) and reads generation_config.json's eos ids.
  explicit PromptBuilder(const std::string& engine_dir);

  // Throws ProtocolError 400 naming the field: no chat template, a conversation the template
  // refuses, token ids outside [0, vocab), an empty prompt, prompt (+ max_tokens) over max_context.
  Prompt build(const CompletionRequest& request, int vocab, int64_t max_context) const;
  // The prompt text a chat request renders to.
  std::string render_chat(const CompletionRequest& request) const;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const std::vector<int32_t>& eos() const { return eos_; }

 private:
  Tokenizer tokenizer_;
  std::optional<ChatTemplate> template_;
  nlohmann::ordered_json template_vars_;  // bos_token, eos_token
  std::vector<int32_t> eos_;
};

// The end-of-sequence ids of ENGINE_DIR/generation_config.json (none when the file is absent).
std::vector<int32_t> eos_token_ids(const std::string& engine_dir);

}  // namespace rocket
