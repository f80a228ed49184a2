// CompiledGrammar: one schema's automaton bound to the fuel's vocabulary, with its mask cache. Shared
// by every request with the same schema (GrammarCache); the cache fills as requests visit nodes.
//
// Thread safety: immutable apart from the mask cache, which is thread-safe.
#pragma once

#include <memory>

#include "grammar/automaton.h"
#include "grammar/mask_cache.h"
#include "grammar/vocabulary.h"

namespace rocket::grammar {

class CompiledGrammar {
 public:
  // REQUIRES: `vocabulary` outlives the grammar.
  CompiledGrammar(std::shared_ptr<const Automaton> automaton, const Vocabulary& vocabulary)
      : automaton_(std::move(automaton)), vocabulary_(vocabulary), masks_(*automaton_, vocabulary.trie) {}

  const Automaton& automaton() const { return *automaton_; }
  const Vocabulary& vocabulary() const { return vocabulary_; }
  MaskCache& masks() const { return masks_; }

 private:
  std::shared_ptr<const Automaton> automaton_;
  const Vocabulary& vocabulary_;
  mutable MaskCache masks_;
};

}  // namespace rocket::grammar
