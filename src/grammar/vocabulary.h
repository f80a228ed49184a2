// Vocabulary: what a grammar needs of the fuel's tokenizer, built once per server: the token trie
// and the end-of-sequence ids (allowed exactly when the grammar accepts).
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/token_trie.h"

namespace rocket::grammar {

struct Vocabulary {
  TokenTrie trie;
  std::vector<int32_t> eos;
};

}  // namespace rocket::grammar
