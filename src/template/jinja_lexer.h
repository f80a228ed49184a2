// Tokenizer of the chat-template engine: Jinja2's lexer as HF transformers configures it.
//
// HF renders chat templates with trim_blocks=True and lstrip_blocks=True (and Jinja's defaults
// otherwise), so this lexer applies, like Jinja2's:
//   - newlines normalised to "\n" and one trailing newline of the source dropped;
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag, `-%}`, `-}}`, `-#}` all after it;
//   - lstrip_blocks: spaces and tabs between a line start and `{%` or `{#` are dropped (not before
//     `{{`, and not with `{%+`);
//   - trim_blocks: the first newline after `%}` or `#}` is dropped (not after `}}`, not with `+%}`).
// Comments vanish here. Every token carries its 1-based source line for error messages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rocket::jinja {

enum class TokenKind {
  kData,        // template text, whitespace control already applied
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kVarBegin,    // {{
  kVarEnd,      // }}
  kName,
  kString,      // text: the decoded literal
  kInteger,
  kFloat,
  kOperator,    // text: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  kEnd,
};

struct Token {
  TokenKind kind;
  std::string text;
  int line;
};

// Throws Error naming the line for an unterminated tag, comment or string, or a character that
// starts no token.
std::vector<Token> tokenize(std::string_view source);

}  // namespace rocket::jinja
