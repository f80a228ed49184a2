#include "grammar/token_trie.h"

#include <algorithm>

#include "core/error.h"

namespace rocket::grammar {

TokenTrie TokenTrie::build(const Tokenizer& tokenizer, int vocab) {
  CHECK(vocab >= tokenizer.vocab_size(), "the engine's vocabulary holds every token");
  std::vector<std::string> tokens(size_t(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id)
    if (!tokenizer.is_special(id)) tokens[size_t(id)] = std::string(tokenizer.token_bytes(id));
  return from_tokens(tokens, vocab);
}

TokenTrie TokenTrie::from_tokens(const std::vector<std::string>& tokens, int vocab) {
  TokenTrie t;
  t.vocab_ = vocab;
  t.bytes_ = tokens;
  std::vector<int32_t> order;
  for (size_t id = 0; id < tokens.size(); ++id)
    if (!tokens[id].empty()) order.push_back(int32_t(id));
  // Sorted by bytes, the tokens list the trie in preorder: each token's node follows its prefixes.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tokens[size_t(a)] < tokens[size_t(b)]; });
  t.nodes_.push_back({0, 0, 0, -1, 0, 0});
  std::vector<int32_t> path{0};  // node index at each depth of the current token
  std::string current;           // the bytes of path's deepest node
  for (int32_t id : order) {
    const std::string& s = tokens[size_t(id)];
    size_t common = 0;
    while (common < current.size() && common < s.size() && current[common] == s[common]) ++common;
    // Close the subtrees of the previous token's nodes deeper than the shared prefix.
    for (size_t d = current.size(); d > common; --d) t.nodes_[size_t(path[d])].end = int32_t(t.nodes_.size());
    path.resize(common + 1);
    current.resize(common);
    for (size_t d = common; d < s.size(); ++d) {
      const int32_t at = int32_t(t.ids_.size());
      t.nodes_.push_back({uint8_t(s[d]), int32_t(d + 1), 0, path.back(), at, at});
      path.push_back(int32_t(t.nodes_.size() - 1));
      current.push_back(s[d]);
    }
    // Ids are appended in preorder, so each node's ids are one contiguous run.
    TrieNode& leaf = t.nodes_[size_t(path.back())];
    if (leaf.token_end == leaf.token_begin) leaf.token_begin = leaf.token_end = int32_t(t.ids_.size());
    t.ids_.push_back(id);
    leaf.token_end = int32_t(t.ids_.size());
  }
  for (size_t d = current.size(); d > 0; --d) t.nodes_[size_t(path[d])].end = int32_t(t.nodes_.size());
  t.nodes_[0].end = int32_t(t.nodes_.size());
  return t;
}

std::string TokenTrie::prefix(int32_t i) const {
  std::string s;
  for (; i > 0; i = nodes_[size_t(i)].parent) s.push_back(char(nodes_[size_t(i)].byte));
  std::reverse(s.begin(), s.end());
  return s;
}

}  // namespace rocket::grammar
