// JSON Schema `pattern` (ECMA-262 syntax) -> the body of a JSON string whose value matches it.
//
// The subset: literals (UTF-8), escapes (\d \w \s \D \W \S, \n \t \r \f \v, \xHH, \uHHHH, an escaped
// punctuation character), `.`, classes [...] with ranges and negation, groups (...) and (?:...),
// alternation |, quantifiers * + ? {n} {n,} {n,m} (lazy forms too: same language), ^ at the start and
// $ at the end. Without ^ (or $) the match may start (or end) anywhere, as JSON Schema says: any
// characters are allowed before (after) it. Backreferences, lookaround, word boundaries and anchors
// elsewhere are refused. A bounded repetition above kMaxCount is refused.
#pragma once

#include <string>
#include <string_view>

#include "grammar/fragments.h"

namespace rocket::grammar {

// Throws SchemaError at `path` for a pattern outside the subset.
Fragment compile_pattern(Fragments& f, std::string_view pattern, const std::string& path);

}  // namespace rocket::grammar
