#include "grammar/matcher.h"

#include <algorithm>
#include <bit>

namespace rocket::grammar {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), stepper_(grammar_->automaton(), pool_) {
  const Automaton& a = grammar_->automaton();
  stepper_.start(a.rule_start(a.root()), kRoot, state_);
}

int Matcher::fill_mask(std::span<uint32_t> mask, uint64_t budget) {
  if (done_) {
    std::fill(mask.begin(), mask.end(), 0u);
    return 0;
  }
  last_work_ = 0;
  budget_ = budget;
  for (const Memo& m : memo_) {
    if (m.mask.size() == mask.size() && m.accept == state_.accept && m.tops == state_.tops) {
      std::copy(m.mask.begin(), m.mask.end(), mask.begin());
      return m.count;
    }
  }
  std::fill(mask.begin(), mask.end(), 0u);
  MaskCache& cache = grammar_->masks();
  uint64_t& work = last_work_;
  work = state_.tops.size();
  for (int32_t top : state_.tops) {
    const NodeMask& m = cache.get(pool_[top].node, work);
    work += mask.size() / 8;  // the OR below, in units of about a frame's cost
    for (size_t w = 0; w < mask.size(); ++w) mask[w] |= m.accepted[w];
    for (int32_t root : m.uncertain)
      if (!walk_uncertain(top, root, mask, work)) return kTooComplex;
    if (work > budget_) return kTooComplex;
  }
  if (state_.accept)
    for (int32_t id : grammar_->vocabulary().eos) mask[size_t(id) / 32] |= 1u << (id % 32);
  int n = 0;
  for (uint32_t w : mask) n += std::popcount(w);
  Memo& memo = memo_[memo_next_++ % kMemos];
  memo.tops = state_.tops;
  memo.accept = state_.accept;
  memo.mask.assign(mask.begin(), mask.end());
  memo.count = n;
  return n;
}

bool Matcher::walk_uncertain(int32_t top, int32_t root, std::span<uint32_t> mask, uint64_t& work) {
  const uint64_t work0 = stepper_.work();
  const TokenTrie& trie = grammar_->vocabulary().trie;
  const auto& nodes = trie.nodes();
  const TokenTrie::TrieNode& r = nodes[size_t(root)];
  // The parse before the subtree's first byte: the real stack over the bytes above it.
  StackSet at;
  at.tops.assign(1, top);
  for (char c : trie.prefix(r.parent)) {
    stepper_.step(at, uint8_t(c), next_);
    if (next_.empty()) return true;
    std::swap(at, next_);
  }
  if (walk_.size() <= size_t(r.depth)) walk_.resize(size_t(r.depth) + 1);
  walk_[size_t(r.depth) - 1] = std::move(at);
  for (int32_t i = root; i < r.end;) {
    const TokenTrie::TrieNode& t = nodes[size_t(i)];
    const size_t d = size_t(t.depth);
    if (walk_.size() <= d) walk_.resize(d + 1);
    stepper_.step(walk_[d - 1], t.byte, walk_[d]);
    if (work + (stepper_.work() - work0) > budget_) {
      work += stepper_.work() - work0;
      return false;
    }
    if (walk_[d].empty() && !walk_[d].accept) {
      i = t.end;
      continue;
    }
    for (int32_t id : trie.tokens(t)) mask[size_t(id) / 32] |= 1u << (id % 32);
    ++i;
  }
  work += stepper_.work() - work0;
  return true;
}

bool Matcher::advance(int32_t token) {
  if (done_) return false;
  const Vocabulary& v = grammar_->vocabulary();
  if (std::find(v.eos.begin(), v.eos.end(), token) != v.eos.end()) {
    if (!state_.accept) return false;
    done_ = true;
    return true;
  }
  const std::string_view bytes = v.trie.token_bytes(token);
  return !bytes.empty() && advance_bytes(bytes);
}

bool Matcher::advance_bytes(std::string_view bytes) {
  if (done_) return false;
  StackSet at = state_;
  for (char c : bytes) {
    stepper_.step(at, uint8_t(c), next_);
    if (next_.empty() && !next_.accept) return false;
    std::swap(at, next_);
  }
  state_ = std::move(at);
  position_ += bytes.size();
  return true;
}

}  // namespace rocket::grammar
