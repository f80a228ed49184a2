// TokenTrie: the vocabulary's token bytes as a trie in preorder, which is how masks are computed:
// walking it moves a parse state over each token's bytes once per shared prefix, and a prefix that no
// state can take prunes its whole subtree (node i's subtree is [i, end)).
//
// Special tokens (<|im_end|>, <|endoftext|>) are not in it: a grammar never writes them; the eos ids
// are allowed separately, exactly when the grammar accepts.
//
// Thread safety: immutable after build.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rocket::grammar {

class TokenTrie {
 public:
  struct TrieNode {
    uint8_t byte;        // the byte from the parent to this node
    int32_t depth;       // bytes from the root; the root (index 0) has depth 0
    int32_t end;         // one past the last node of this subtree
    int32_t parent;
    int32_t token_begin, token_end;  // tokens(): the ids whose bytes end exactly here
  };

  // `vocab`: the engine's row count (>= tokenizer.vocab_size()); masks span it.
  static TokenTrie build(const Tokenizer& tokenizer, int vocab);
  // Same from token strings by id (empty: no token there); for tests and the fuzz harness.
  static TokenTrie from_tokens(const std::vector<std::string>& tokens, int vocab);

  const std::vector<TrieNode>& nodes() const { return nodes_; }
  std::span<const int32_t> tokens(const TrieNode& n) const {
    return {ids_.data() + n.token_begin, size_t(n.token_end - n.token_begin)};
  }
  // The bytes from the root to node i.
  std::string prefix(int32_t i) const;
  // A token's bytes; empty for ids outside the trie (special tokens, gaps, padding rows).
  std::string_view token_bytes(int32_t id) const {
    return id >= 0 && size_t(id) < bytes_.size() ? std::string_view(bytes_[size_t(id)]) : std::string_view();
  }
  int vocab() const { return vocab_; }
  // Words of a token bitmask over the vocabulary (bit t of word t / 32).
  int mask_words() const { return (vocab_ + 31) / 32; }

 private:
  std::vector<TrieNode> nodes_;
  std::vector<int32_t> ids_;
  std::vector<std::string> bytes_;  // by id
  int vocab_ = 0;
};

}  // namespace rocket::grammar
