#include "grammar/grammar_cache.h"

#include "grammar/json_schema.h"

namespace rocket::grammar {

template <typename Compile>
std::shared_ptr<const CompiledGrammar> GrammarCache::lookup(const std::string& key, Compile compile) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const auto it = entries_.find(key); it != entries_.end()) {
      order_.splice(order_.begin(), order_, it->second.at);
      return it->second.grammar;
    }
  }
  // Compiled outside the lock: another thread's hit need not wait for it.
  auto grammar = std::make_shared<const CompiledGrammar>(compile(), vocabulary_);
  std::lock_guard<std::mutex> lock(mu_);
  if (const auto it = entries_.find(key); it != entries_.end()) return it->second.grammar;
  order_.push_front(key);
  entries_.emplace(key, Entry{grammar, order_.begin()});
  if (entries_.size() > kCapacity) {
    entries_.erase(order_.back());
    order_.pop_back();
  }
  return grammar;
}

std::shared_ptr<const CompiledGrammar> GrammarCache::get(const nlohmann::ordered_json& schema) {
  // The key keeps the client's key order: property order decides the output's, so two orders are
  // two grammars.
  return lookup(schema.dump(), [&] { return schema.is_null() ? compile_any_object() : compile_schema(schema); });
}

std::shared_ptr<const CompiledGrammar> GrammarCache::get(const ToolCallsSpec& spec) {
  // A schema's text never starts with a space, so the prefix keeps the two kinds apart.
  return lookup(" tools " + spec.key(), [&] { return compile_tool_calls(spec); });
}

}  // namespace rocket::grammar
