// A fuel's chat template (tokenizer_config.json "chat_template"), compiled once and rendered per
// request into the prompt text, byte for byte as HF transformers' apply_chat_template (Python Jinja2
// in its immutable sandbox, trim_blocks and lstrip_blocks on) renders it. Where the engine knowingly
// differs (integers past 64 bits, Unicode case mappings beyond ß, printf-style `%` on strings, printing
// a bound method or generator) it fails or says so in jinja_*.h; none of these occur in the templates
// and conversations the tests cover.
//
// compile() parses the whole template and refuses, naming the construct and line, anything outside
// the engine's Jinja subset (jinja_parser.h, jinja_builtins.h list it): `rocket build` calls it, so an
// unsupported template stops the build and never fails a request. render() can still fail on the
// request's data (a raise_exception() the template makes, a type error such as str + none); that is an
// Error with the template's message, which the server answers as a bad request.
//
// The context is an ordered_json because key order is observable: `tools | tojson` prints each JSON
// schema with its keys in the order the client sent them, as Python's json.dumps does. (nlohmann::json
// would sort them.)
//
// Message content. OpenAI clients send `content` as a string, as null (assistant turns that only call
// tools), or as an array of parts. A template that never iterates over a `content` (Qwen3's, most
// text-only ones) is handed strings only, as vLLM does for such templates: text parts are joined with
// "\n" and null becomes "". A template that loops over some `content` (Qwen3.5's render_content
// macro, for instance) gets the message exactly as sent. Parts other than text are refused.
//
// Thread safety: a compiled ChatTemplate is immutable; render() may run concurrently on any threads.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace rocket {

namespace jinja {
struct Template;
}

class ChatTemplate {
 public:
  // Throws Error "chat template line N: ..." for a syntax error or an unsupported construct.
  static ChatTemplate compile(const std::string& source);

  // `context` holds the template's variables: messages, tools, add_generation_prompt,
  // enable_thinking, bos_token, eos_token, ... (absent ones are Undefined to the template).
  // Throws Error for a malformed context or a failure while rendering.
  std::string render(const nlohmann::ordered_json& context) const;

  // Whether messages reach the template with content as sent (true) or flattened to strings.
  bool takes_content_parts() const { return takes_content_parts_; }

 private:
  ChatTemplate(std::shared_ptr<const jinja::Template> tpl, bool takes_content_parts);

  std::shared_ptr<const jinja::Template> template_;
  bool takes_content_parts_;
};

}  // namespace rocket
