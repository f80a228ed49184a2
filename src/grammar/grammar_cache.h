// GrammarCache: compiled grammars by schema, so a schema compiles once however many requests carry it
// (agents send the same response_format or tool set on every turn), and requests sharing it share its
// mask cache too. Keyed by the schema's text (hashed; tool-call grammars by their spec's, prefixed so
// that no schema collides); holds the kCapacity most recently used.
//
// Thread safety: get() may be called from any thread.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "grammar/compiled_grammar.h"
#include "grammar/tool_calls.h"
#include "grammar/vocabulary.h"

namespace rocket::grammar {

class GrammarCache {
 public:
  static constexpr size_t kCapacity = 64;

  explicit GrammarCache(Vocabulary vocabulary) : vocabulary_(std::move(vocabulary)) {}

  // The grammar of `schema` (compile_schema), or of any JSON object when `schema` is null (the
  // json_object response format). Throws SchemaError.
  std::shared_ptr<const CompiledGrammar> get(const nlohmann::ordered_json& schema);
  // The grammar of tool calls (compile_tool_calls), keyed by spec.key(). Throws SchemaError.
  std::shared_ptr<const CompiledGrammar> get(const ToolCallsSpec& spec);

  const Vocabulary& vocabulary() const { return vocabulary_; }

 private:
  // The grammar under `key`, compiling it with `compile` on a miss.
  template <typename Compile>
  std::shared_ptr<const CompiledGrammar> lookup(const std::string& key, Compile compile);

  Vocabulary vocabulary_;
  std::mutex mu_;
  std::list<std::string> order_;  // most recent first
  struct Entry {
    std::shared_ptr<const CompiledGrammar> grammar;
    std::list<std::string>::iterator at;
  };
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace rocket::grammar
