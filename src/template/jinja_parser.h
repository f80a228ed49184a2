// Parser of the chat-template engine: Jinja2's grammar (operator precedence, chained comparisons,
// `is` tests, filters, inline if) for the subset chat templates use, into the tree of jinja_ast.h.
//
// Statements: if/elif/else, for (tuple targets, `if` clause, else), set (names, tuples, namespace
// attributes, block form), macro, break/continue, and HF's transparent generation block. Everything
// else ({% include %}, {% call %}, {% filter %}, {% raw %}, recursive loops, argument unpacking, ...)
// and every filter, test, method or function jinja_builtins.h does not implement is refused here with
// its name and line, so that an unsupported template fails when it is compiled, never at a request.
#pragma once

#include <string_view>

#include "template/jinja_ast.h"

namespace rocket::jinja {

// Throws Error "chat template line N: ..." on a syntax error or an unsupported construct.
Template parse_template(std::string_view source);

}  // namespace rocket::jinja
