// Building blocks for an Automaton's rule bodies (Thompson construction): byte ranges, literals,
// sequence, choice, repetition, calls, and the pieces of JSON text every schema shares (whitespace,
// the characters of a string). Each returns a Fragment of fresh nodes joined by epsilon edges.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/automaton.h"

namespace rocket::grammar {

// Inclusive code point ranges, sorted and disjoint.
using CodepointSet = std::vector<std::pair<uint32_t, uint32_t>>;

class Fragments {
 public:
  explicit Fragments(Automaton& a) : a_(a) {}

  Fragment empty();
  Fragment bytes(uint8_t lo, uint8_t hi);
  Fragment literal(std::string_view text);
  Fragment seq(Fragment a, Fragment b);
  Fragment choice(const std::vector<Fragment>& alternatives);
  Fragment optional(Fragment f);
  Fragment star(Fragment f);
  Fragment call(int32_t rule);
  // Makes `body` the whole of `rule` (from its start node to its end).
  void define(int32_t rule, Fragment body);

  // Whitespace between JSON tokens, bounded so that output cannot run on in blanks: nothing, a
  // space, or a newline and up to kIndent spaces (pretty-printed JSON a dozen levels deep).
  static constexpr int kIndent = 24;
  Fragment whitespace();
  // One character of a JSON string as written between its quotes: unescaped UTF-8 (no control
  // character, quote or backslash) or an escape. \u escapes stop short of surrogates: a lone
  // surrogate is not valid Unicode, and non-BMP characters are written as raw UTF-8.
  // `excluded`: ASCII bytes never written raw (their escapes still are: "\/" for '/').
  Fragment json_char(std::string_view excluded = {});
  // One character of `set` as a JSON string writes it (the canonical form: raw UTF-8, \" \\, and the
  // short or \u00XX escapes for control characters). REQUIRES: `set` non-empty.
  Fragment json_char_of(const CodepointSet& set);
  // Any bytes that contain none of `needles` (free text before a tool call, an XML parameter's raw
  // value): a node per proper prefix of the needles, each an exit. The empty text included.
  // REQUIRES: needles non-empty, none empty.
  Fragment without(const std::vector<std::string_view>& needles);
  // UTF-8 encodings of the code points in [lo, hi] (surrogates excluded).
  Fragment utf8_range(uint32_t lo, uint32_t hi);

  Automaton& automaton() { return a_; }

 private:
  Automaton& a_;
};

}  // namespace rocket::grammar
