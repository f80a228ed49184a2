// Interpreter of the chat-template engine: runs a parsed Template (jinja_ast.h) over top-level
// variables, with Jinja2's scoping:
//   - each iteration of a `for` loop has its own scope: its variables, `loop`, and anything the body
//     sets vanish after the iteration (the next one reads the outer value again); `if` has no scope;
//   - a macro runs in a fresh scope over the template's top level (the parser admits macros only
//     there), never over its caller's variables;
//   - {% set ns.attr %} writes through to the namespace object, which is how templates carry state
//     out of loops.
// Rendering is re-entrant: nothing is shared between calls but the (immutable) tree.
#pragma once

#include <string>

#include "template/jinja_ast.h"

namespace rocket::jinja {

// Deeper macro recursion than this is refused (Python would hit its own recursion limit).
inline constexpr int kMaxMacroDepth = 100;
// Nested expression evaluations, macro calls included (the fuel templates nest a few dozen): a
// recursing macro with deeply nested expressions overflowed the stack under the macro bound alone.
inline constexpr int kMaxEvalDepth = 1000;
// A render's work is bounded, so no template (a fuel's, or one a fuzzer writes) can hang a request:
// statements run plus loop iterations (a fuel's template does a bounded handful per message and tool,
// and a conversation that fits a context has at most a few hundred thousand of those; nested loops or
// macros that call themselves twice per level would run for hours), and the bytes of any one string
// built, the output included (a prompt past this is past every context).
inline constexpr int64_t kMaxRenderSteps = 5'000'000;
inline constexpr int64_t kMaxRenderBytes = int64_t(64) << 20;

// Throws Error "chat template line N: ..." for any failure while rendering; a raise_exception() call
// gives "chat template raised an exception (line N): <its message>".
std::string render(const Template& tpl, const Object& variables);

}  // namespace rocket::jinja
