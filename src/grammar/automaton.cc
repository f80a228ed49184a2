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

void Automaton::check() const {
  const size_t n = nodes_.size(), rules = rule_start_.size();
  auto fail = [&](int32_t rule, const std::string& what) {
    throw SchemaError(rule_name_[size_t(rule)], what);
  };
  // Productive nodes (some path from them ends the rule), to a fixpoint.
  std::vector<char> productive(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (productive[i]) continue;
      const Node& v = nodes_[i];
      bool p = v.final;
      for (const ByteEdge& e : v.bytes) p = p || productive[size_t(e.to)];
      for (int32_t e : v.eps) p = p || productive[size_t(e)];
      for (const CallEdge& c : v.calls) p = p || (productive[size_t(rule_start_[size_t(c.rule)])] && productive[size_t(c.ret)]);
      if (p) productive[i] = 1, changed = true;
    }
  }
  // Which rule owns each node, by walking each rule's body from its start (calls stay outside).
  std::vector<int32_t> owner(n, -1);
  for (size_t r = 0; r < rules; ++r) {
    std::vector<int32_t> work{rule_start_[r]};
    owner[size_t(rule_start_[r])] = int32_t(r);
    while (!work.empty()) {
      const Node& v = nodes_[size_t(work.back())];
      work.pop_back();
      auto visit = [&](int32_t to) {
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
  for (size_t r = 0; r < rules; ++r) {
    std::vector<char> seen(n, 0);
    std::vector<int32_t> work{rule_start_[r]};
    seen[size_t(rule_start_[r])] = 1;
    while (!work.empty()) {
      const Node& v = nodes_[size_t(work.back())];
      work.pop_back();
      // The root is never called, so it alone may end at once (an empty answer: free text that may
      // lead to a tool call, tool_calls.h).
      if (v.final && int32_t(r) != root_) fail(int32_t(r), "this part of the schema matches an empty value");
      for (const CallEdge& c : v.calls) first_calls[r].push_back(c.rule);
      for (int32_t e : v.eps)
        if (!seen[size_t(e)]) seen[size_t(e)] = 1, work.push_back(e);
    }
  }
  std::vector<int> color(rules, 0);  // 0 unvisited, 1 on the path, 2 done
  auto dfs = [&](auto&& self, int32_t r) -> void {
    color[size_t(r)] = 1;
    for (int32_t s : first_calls[size_t(r)]) {
      if (color[size_t(s)] == 1) fail(s, "the schema refers to itself ($ref) before any value is written (left recursion)");
      if (color[size_t(s)] == 0) self(self, s);
    }
    color[size_t(r)] = 2;
  };
  for (size_t r = 0; r < rules; ++r)
    if (color[r] == 0) dfs(dfs, int32_t(r));
}

}  // namespace rocket::grammar
