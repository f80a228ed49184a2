// Parse stacks of an Automaton, and moving a set of them over one byte.
//
// A stack is a chain of frames, each (node, parent): the top frame's node is where the parse is, each
// frame below holds the node its rule returns to. Frames are interned in a StackPool, so equal stacks
// are one id and a set of parse states is a small sorted vector of top-frame ids (an NFA's state set,
// with stacks). Below the bottom frame lies one of two sentinels: kRoot (the whole grammar: ending
// there accepts) or kBase (the mask cache's unknown caller: ending there "escapes" the part of the
// stack it looked at).
//
// Thread safety: none; each Matcher and each mask-cache computation has its own pool.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"

namespace rocket::grammar {

constexpr int32_t kRoot = -1;
constexpr int32_t kBase = -2;

class StackPool {
 public:
  struct Frame {
    int32_t node, parent;
  };
  int32_t intern(int32_t node, int32_t parent);
  const Frame& operator[](int32_t id) const { return frames_[size_t(id)]; }
  size_t size() const { return frames_.size(); }

 private:
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> index_;
};

// Where a set of parse states stands after a closure: the frames that wait for a byte, and whether
// some state ended the grammar (accept) or its kBase stack (escaped).
struct StackSet {
  std::vector<int32_t> tops;  // sorted, unique; each top's node has byte edges
  bool accept = false;
  bool escaped = false;
  bool empty() const { return tops.empty(); }
};

// Moves parse states without input: epsilon edges, calls (push) and rule ends (pop), until every
// state waits for a byte. Scratch is kept between calls so stepping allocates little.
class Stepper {
 public:
  Stepper(const Automaton& automaton, StackPool& pool) : a_(automaton), pool_(pool) {}

  // The closure of the single state (node, parent).
  void start(int32_t node, int32_t parent, StackSet& out);
  // The states after `from` consumes `byte`, closed. `out` must not alias `from`.
  void step(const StackSet& from, uint8_t byte, StackSet& out);
  // Frames expanded and byte edges tried so far: the stepper's work, a deterministic measure of time.
  uint64_t work() const { return work_done_; }

 private:
  void close(StackSet& out);

  const Automaton& a_;
  StackPool& pool_;
  std::vector<int32_t> work_;  // frames to expand
  // Frames expanded in this closure: seen_[f] == epoch_. A stamp per frame rather than a scanned list,
  // because a schema's pattern can make one closure hold hundreds of thousands of frames (the grammar
  // fuzzer's `(a...|b)*+++...` spent minutes in a linear scan there).
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
  uint64_t work_done_ = 0;
};

}  // namespace rocket::grammar
