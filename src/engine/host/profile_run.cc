#include "engine/host/profile_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "engine/corpus.h"
#include "engine/host/host_engine.h"
#include "engine/profile_options.h"
#include "fuel/coactivation.h"
#include "kernels/host/sample.h"
#include "openai/prompt_builder.h"

namespace rocket {

int cmd_profile(const std::filesystem::path& dir, const std::vector<std::string>& args) {
  ProfileOptions o;
  CLI::App cli("Runs the fuel over a corpus and writes its co-activation profile: per MoE layer, how often each\n"
               "expert is chosen and how often each pair is chosen for one token (rocket build --coactivation).",
               "rocket-engine profile");
  add_profile_options(cli, o);
  if (const auto rc = parse_command(cli, args)) return *rc;
  const auto t0 = std::chrono::steady_clock::now();
  const Corpus corpus = read_corpus(o.corpus, o.max_tokens);
  HostEngine e(dir.string());
  const PromptBuilder prompts(dir.string());
  const Chemistry& chem = e.plan().chemistry;
  CoactivationProfile profile(chem, fuel_fingerprint(chem, [&](const std::string& name) { return e.tensor_bytes(name); }));
  e.count_routes(&profile);
  int64_t tokens = 0;
  for (const CorpusEntry& entry : corpus.entries) {
    std::vector<int32_t> ids;
    try {
      ids = prompts.build(entry.request, int(engine::kVocab), engine::kMaxContext).ids;
    } catch (const Error& err) {
      fail("{}:{}: {}", corpus.path, entry.line, err.what());
    }
    // Prefill in the plan's chunks; the LM head runs only for the last row, and only when a token is
    // decoded after it.
    e.reset_slot(0);
    const int n_ids = int(ids.size());
    for (int at = 0; at < n_ids; at += int(engine::kPrefillChunk)) {
      const int n = std::min(int(engine::kPrefillChunk), n_ids - at);
      const bool last = at + n == n_ids;
      e.prefill(0, ids.data() + at, n, at, last && o.max_tokens > 0 ? n - 1 : n);
    }
    tokens += n_ids;
    const float* logits = e.logits((n_ids - 1) % int(engine::kPrefillChunk));
    int64_t pos = n_ids;
    for (int t = 0; t < o.max_tokens && pos < engine::kMaxContext; ++t, ++pos) {
      int32_t next = host::argmax(logits, int(engine::kVocab));
      if (std::find(prompts.eos().begin(), prompts.eos().end(), next) != prompts.eos().end()) break;
      const int slot = 0;
      e.decode(1, &next, &slot, &pos);
      logits = e.logits(0);
      ++tokens;
    }
  }
  e.count_routes(nullptr);
  profile.corpus() = ProfiledCorpus{std::filesystem::absolute(corpus.path).string(), int64_t(corpus.entries.size()),
                                    tokens, corpus.fnv64};
  profile.save(o.out);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "[profile] %zu entries, %lld tokens routed through %d MoE layers in %.1f s; fuel %s; wrote %s\n",
               corpus.entries.size(), static_cast<long long>(tokens), profile.layers(), s,
               profile.fuel().fuel_fingerprint.c_str(), o.out.c_str());
  return 0;
}

}  // namespace rocket
