#include "grammar/parse_stack.h"

#include <algorithm>

namespace rocket::grammar {

int32_t StackPool::intern(int32_t node, int32_t parent) {
  const uint64_t key = (uint64_t(uint32_t(node)) << 32) | uint32_t(parent);
  auto [it, fresh] = index_.try_emplace(key, int32_t(frames_.size()));
  if (fresh) frames_.push_back({node, parent});
  return it->second;
}

void Stepper::start(int32_t node, int32_t parent, StackSet& out) {
  out.tops.clear();
  out.accept = out.escaped = false;
  work_.assign(1, pool_.intern(node, parent));
  close(out);
}

void Stepper::step(const StackSet& from, uint8_t byte, StackSet& out) {
  out.tops.clear();
  out.accept = out.escaped = false;
  work_.clear();
  for (int32_t f : from.tops) {
    const StackPool::Frame fr = pool_[f];
    work_done_ += a_.node(fr.node).bytes.size();
    for (const ByteEdge& e : a_.node(fr.node).bytes)
      if (byte >= e.lo && byte <= e.hi) work_.push_back(pool_.intern(e.to, fr.parent));
  }
  close(out);
}

void Stepper::close(StackSet& out) {
  if (++epoch_ == 0) {  // wrapped: no stale stamp may equal the new epoch
    std::fill(seen_.begin(), seen_.end(), 0u);
    epoch_ = 1;
  }
  while (!work_.empty()) {
    const int32_t f = work_.back();
    work_.pop_back();
    ++work_done_;
    if (size_t(f) >= seen_.size()) seen_.resize(std::max(size_t(f) + 1, 2 * seen_.size()), 0u);
    if (seen_[size_t(f)] == epoch_) continue;
    seen_[size_t(f)] = epoch_;
    const StackPool::Frame fr = pool_[f];
    const Node& v = a_.node(fr.node);
    if (!v.bytes.empty()) out.tops.push_back(f);
    for (int32_t e : v.eps) work_.push_back(pool_.intern(e, fr.parent));
    for (const CallEdge& c : v.calls)
      work_.push_back(pool_.intern(a_.rule_start(c.rule), pool_.intern(c.ret, fr.parent)));
    if (v.final) {
      if (fr.parent == kRoot) out.accept = true;
      else if (fr.parent == kBase) out.escaped = true;
      else work_.push_back(fr.parent);  // the parent frame already sits at the return node
    }
  }
  std::sort(out.tops.begin(), out.tops.end());
}

}  // namespace rocket::grammar
