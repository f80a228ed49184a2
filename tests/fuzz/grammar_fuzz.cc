// The structured-output compiler on arbitrary schemas: compile_schema either refuses with a
// SchemaError or gives an automaton on which a random walk of masked tokens never meets an empty
// mask, every picked token advances, and a walk that completes is JSON that parses. Input: a JSON
// schema's text (the walk's seed is its length).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace {

using namespace rocket::grammar;

const Vocabulary& vocabulary() {
  static const Vocabulary v = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, char(b)));
    for (const char* t : {"{\"", "\":", "\",", "\"}", "},{", "true", "null", "12", "\\u00", "é", "\xE2\x82", "\n  ", "[\"", "\"]"})
      tokens.push_back(t);
    tokens.push_back("");  // eos
    return Vocabulary{TokenTrie::from_tokens(tokens, int(tokens.size())), {int32_t(tokens.size() - 1)}};
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::ordered_json schema =
      nlohmann::ordered_json::parse(std::string(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (schema.is_discarded()) return 0;
  std::shared_ptr<const Automaton> a;
  try {
    a = compile_schema(schema);
  } catch (const SchemaError&) {
    return 0;
  }
  auto g = std::make_shared<const CompiledGrammar>(a, vocabulary());
  Matcher m(g);
  std::mt19937 rng{uint32_t(size)};
  std::vector<uint32_t> mask(size_t(vocabulary().trie.mask_words()));
  std::string text;
  for (int step = 0; step < 64 && !m.done(); ++step) {
    if (m.fill_mask(mask) == 0) {
      std::fprintf(stderr, "empty mask after '%s'\n", text.c_str());
      std::abort();
    }
    std::vector<int32_t> ok;
    for (int32_t id = 0; id < vocabulary().trie.vocab(); ++id)
      if (mask[size_t(id) / 32] >> (id % 32) & 1u) ok.push_back(id);
    const int32_t pick = m.accepting() ? vocabulary().eos[0] : ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
    if (!m.advance(pick)) {
      std::fprintf(stderr, "an allowed token %d did not advance after '%s'\n", pick, text.c_str());
      std::abort();
    }
    if (!m.done()) text += vocabulary().trie.token_bytes(pick);
  }
  if (m.done() && nlohmann::json::parse(text, nullptr, false).is_discarded()) {
    std::fprintf(stderr, "a complete output does not parse: '%s'\n", text.c_str());
    std::abort();
  }
  return 0;
}
