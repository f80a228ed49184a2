// Automaton: a grammar as a pushdown automaton over bytes. It has rules, each a small NFA of nodes
// whose edges consume a byte range, move without input (epsilon), or call another rule and continue
// at a return node once that rule ends. A parse stack is a chain of frames (stack.h); recursion
// ($ref to an enclosing schema) is a call, so the automaton stays finite.
//
// Invariants the compiler (json_schema.cc) keeps and check() verifies: every rule can end (no rule is
// a dead end), no rule can call itself again without consuming a byte (left recursion would make the
// epsilon closure infinite), and no rule but the root (never called) matches the empty string (so a call always consumes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rocket::grammar {

struct ByteEdge {
  uint8_t lo, hi;  // inclusive
  int32_t to;
};

struct CallEdge {
  int32_t rule;
  int32_t ret;  // the node that continues after the rule ends
};

struct Node {
  std::vector<ByteEdge> bytes;
  std::vector<int32_t> eps;
  std::vector<CallEdge> calls;
  bool final = false;  // the node's rule may end here
};

// A piece of one rule under construction: enter at `in`, leave from `out` (Thompson construction).
struct Fragment {
  int32_t in, out;
};

class Automaton {
 public:
  // A new rule with a fresh start node; its body is the caller's to build from rule_start(rule).
  int32_t add_rule(std::string name);
  int32_t add_node();
  void add_bytes(int32_t from, uint8_t lo, uint8_t hi, int32_t to) { nodes_[size_t(from)].bytes.push_back({lo, hi, to}); }
  void add_eps(int32_t from, int32_t to) { nodes_[size_t(from)].eps.push_back(to); }
  void add_call(int32_t from, int32_t rule, int32_t ret) { nodes_[size_t(from)].calls.push_back({rule, ret}); }
  void set_final(int32_t node) { nodes_[size_t(node)].final = true; }
  void set_root(int32_t rule) { root_ = rule; }

  // Throws grammar::SchemaError (json_schema.h) naming the rule when an invariant above fails.
  // Returns the edge visits it took: linear in the automaton's edges, which tests hold it to (a sweep
  // to a fixpoint once took 71 s for an object of 3,000 required properties, on an HTTP thread).
  uint64_t check() const;
  // The automaton's size in check()'s terms: nodes plus edges of every kind.
  uint64_t size() const;

  const Node& node(int32_t id) const { return nodes_[size_t(id)]; }
  size_t node_count() const { return nodes_.size(); }
  size_t rule_count() const { return rule_start_.size(); }
  int32_t rule_start(int32_t rule) const { return rule_start_[size_t(rule)]; }
  const std::string& rule_name(int32_t rule) const { return rule_name_[size_t(rule)]; }
  int32_t root() const { return root_; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> rule_start_;
  std::vector<std::string> rule_name_;
  int32_t root_ = 0;
};

}  // namespace rocket::grammar
