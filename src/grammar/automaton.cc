#include "grammar/automaton.h"

#include <fmt/format.h>

#include "grammar/schema_error.h"

namespace rocket::grammar {

int32_t Automaton::add_rule(std::string name) {
  rule_start_.push_back(add_node());
  rule_name_.push_back(std::move(name));
  return int32_t(rule_start_.size() - 1);
}

int32_t Automaton::add_node() {
  nodes_.emplace_back();
  return int32_t(nodes_.size() - 1);
}

uint64_t Automaton::size() const {
  uint64_t s = nodes_.size();
  for (const Node& v : nodes_) s += v.bytes.size() + v.eps.size() + v.calls.size();
  return s;
}

uint64_t Automaton::check() const {
  const size_t n = nodes_.size(), rules = rule_start_.size();
  uint64_t visits = 0;  // edges looked at, every pass below
  auto fail = [&](int32_t rule, const std::string& what) {
    throw SchemaError(rule_name_[size_t(rule)], what);
  };
  // Productive nodes (some path from them ends the rule): backwards from the final nodes over reversed
  // edges, each node settled once. A call edge makes its node productive once both the called rule's
  // start and the return node are. (Sweeping all nodes to a fixpoint took a sweep per property of an
  // object, whose comma edges lead back to older nodes: 71 s for 3,000 required properties.)
  std::vector<char> productive(n, 0);
  std::vector<std::vector<int32_t>> before(n);  // before[t]: nodes with an edge to t (calls: to start and return)
  std::vector<int32_t> work;
  for (size_t i = 0; i < n; ++i) {
    const Node& v = nodes_[i];
    visits += v.bytes.size() + v.eps.size() + v.calls.size();
    for (const ByteEdge& e : v.bytes) before[size_t(e.to)].push_back(int32_t(i));
    for (int32_t e : v.eps) before[size_t(e)].push_back(int32_t(i));
    for (const CallEdge& c : v.calls) {
      before[size_t(rule_start_[size_t(c.rule)])].push_back(int32_t(i));
      before[size_t(c.ret)].push_back(int32_t(i));
    }
    if (v.final) productive[i] = 1, work.push_back(int32_t(i));
  }
  auto settles = [&](const Node& v) {
    for (const ByteEdge& e : v.bytes) if (++visits, productive[size_t(e.to)]) return true;
    for (int32_t e : v.eps) if (++visits, productive[size_t(e)]) return true;
    for (const CallEdge& c : v.calls)
      if (++visits, productive[size_t(rule_start_[size_t(c.rule)])] && productive[size_t(c.ret)]) return true;
    return false;
  };
  while (!work.empty()) {
    const int32_t t = work.back();
    work.pop_back();
    for (int32_t u : before[size_t(t)])
      if (++visits, !productive[size_t(u)] && settles(nodes_[size_t(u)])) productive[size_t(u)] = 1, work.push_back(u);
  }
  before = {};
  // Which rule owns each node, by walking each rule's body from its start (calls stay outside).
  std::vector<int32_t> owner(n, -1);
  for (size_t r = 0; r < rules; ++r) {
    std::vector<int32_t> work{rule_start_[r]};
    owner[size_t(rule_start_[r])] = int32_t(r);
    while (!work.empty()) {
      const Node& v = nodes_[size_t(work.back())];
      work.pop_back();
      auto visit = [&](int32_t to) {
        ++visits;
        if (owner[size_t(to)] >= 0) return;
        owner[size_t(to)] = int32_t(r);
        work.push_back(to);
      };
      for (const ByteEdge& e : v.bytes) visit(e.to);
      for (int32_t e : v.eps) visit(e);
      for (const CallEdge& c : v.calls) visit(c.ret);
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (owner[i] >= 0 && !productive[i]) fail(owner[i], "the schema can never be satisfied here (no value of it is complete)");
  // No rule may end without consuming (epsilon-reachable final node from its start), and the rules a
  // rule can call before consuming form no cycle.
  std::vector<std::vector<int32_t>> first_calls(rules);
  std::vector<uint32_t> seen(n, 0);  // seen[i] == r + 1: reached from rule r's start (a stamp, not a clear per rule)
  for (size_t r = 0; r < rules; ++r) {
    const uint32_t stamp = uint32_t(r + 1);
    std::vector<int32_t> work{rule_start_[r]};
    seen[size_t(rule_start_[r])] = stamp;
    while (!work.empty()) {
      const Node& v = nodes_[size_t(work.back())];
      work.pop_back();
      // The root is never called, so it alone may end at once (an empty answer: free text that may
      // lead to a tool call, tool_calls.h).
      if (v.final && int32_t(r) != root_) fail(int32_t(r), "this part of the schema matches an empty value");
      visits += v.calls.size() + v.eps.size();
      for (const CallEdge& c : v.calls) first_calls[r].push_back(c.rule);
      for (int32_t e : v.eps)
        if (seen[size_t(e)] != stamp) seen[size_t(e)] = stamp, work.push_back(e);
    }
  }
  std::vector<int> color(rules, 0);  // 0 unvisited, 1 on the path, 2 done
  auto dfs = [&](auto&& self, int32_t r) -> void {
    color[size_t(r)] = 1;
    for (int32_t s : first_calls[size_t(r)]) {
      ++visits;
      if (color[size_t(s)] == 1) fail(s, "the schema refers to itself ($ref) before any value is written (left recursion)");
      if (color[size_t(s)] == 0) self(self, s);
    }
    color[size_t(r)] = 2;
  };
  for (size_t r = 0; r < rules; ++r)
    if (color[r] == 0) dfs(dfs, int32_t(r));
  return visits;
}

}  // namespace rocket::grammar
