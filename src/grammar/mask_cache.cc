#include "grammar/mask_cache.h"

#include "grammar/parse_stack.h"

namespace rocket::grammar {

const NodeMask& MaskCache::get(int32_t node, uint64_t& work) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<NodeMask>& e = entries_[size_t(node)];
  if (!e) e = compute(node, work);
  return *e;
}

size_t MaskCache::computed() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& e : entries_) n += e != nullptr;
  return n;
}

std::unique_ptr<NodeMask> MaskCache::compute(int32_t node, uint64_t& work) const {
  auto out = std::make_unique<NodeMask>();
  out->accepted.assign(size_t(trie_.mask_words()), 0);
  StackPool pool;
  Stepper stepper(a_, pool);
  const auto& nodes = trie_.nodes();
  // states[d]: the parses after the first d bytes of the current trie path; escaped[d]: some parse
  // ended n's rule within them.
  std::vector<StackSet> states(1);
  std::vector<char> escaped(1, 0);
  states[0].tops.push_back(pool.intern(node, kBase));
  for (int32_t i = 1; i < int32_t(nodes.size());) {
    const TokenTrie::TrieNode& t = nodes[size_t(i)];
    const size_t d = size_t(t.depth);
    if (states.size() <= d) states.resize(d + 1), escaped.resize(d + 1);
    stepper.step(states[d - 1], t.byte, states[d]);
    if (states[d].empty()) {
      if (escaped[d - 1] || states[d].escaped) out->uncertain.push_back(i);
      i = t.end;
      continue;
    }
    escaped[d] = escaped[d - 1] || states[d].escaped;
    for (int32_t id : trie_.tokens(t)) out->accepted[size_t(id) / 32] |= 1u << (id % 32);
    ++i;
  }
  work += stepper.work();
  return out;
}

}  // namespace rocket::grammar
