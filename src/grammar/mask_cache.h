// MaskCache: the part of each token mask that does not depend on the parse stack, per automaton node
// (the adaptive token-mask cache of xgrammar, Dong et al. 2024).
//
// For a node n, every token is walked (the trie, pruned by prefix) from n with the stack below n's
// frame unknown (kBase). A token whose bytes keep some parse alive inside what the walk can see is
// `accepted` whatever the stack; one that dies before its rule ends is rejected whatever the stack;
// one that dies only after its rule ended (the rest would be the caller's to parse) is uncertain, and
// kept as the trie subtree it lies in, for the Matcher to walk with the real stack. Tokens that end
// right where the rule ends are accepted too: the caller is at a valid position then.
//
// Because strings, objects and arrays are rules ended by a closing byte, uncertain subtrees are the
// few tokens that begin with that byte, so a mask is mostly a copy of `accepted`.
//
// Thread safety: get() may be called from any thread (one mutex; entries are computed once and never
// change, so a returned reference stays valid for the cache's life).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/token_trie.h"

namespace rocket::grammar {

struct NodeMask {
  std::vector<uint32_t> accepted;   // TokenTrie::mask_words() words
  std::vector<int32_t> uncertain;   // trie node indices: subtrees to walk with the real stack
};

class MaskCache {
 public:
  MaskCache(const Automaton& automaton, const TokenTrie& trie)
      : a_(automaton), trie_(trie), entries_(automaton.node_count()) {}

  // REQUIRES: `node` has byte edges. Adds the stepper work it took to `work` (0 when cached).
  const NodeMask& get(int32_t node, uint64_t& work);
  // Entries computed so far (for the benchmark and tests).
  size_t computed() const;

 private:
  std::unique_ptr<NodeMask> compute(int32_t node, uint64_t& work) const;

  const Automaton& a_;
  const TokenTrie& trie_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<NodeMask>> entries_;
};

}  // namespace rocket::grammar
