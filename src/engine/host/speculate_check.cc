// Speculative decoding is exact under greedy picking: a stream's tokens with drafts verified k + 1
// rows at a time are the tokens of decoding it one row at a time, and every row's logits are bit for
// bit the plain step's (the host engine's rows do not depend on how many run together). Streams run
// interleaved in their own slots, so a verify step that leaked into another stream, or an accept()
// that kept the wrong row's state, shows up as a different token or logit.
#include "engine/host/speculate_check.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/hash.h"
#include "engine/host/host_batch_engine.h"
#include "kernels/host/sample.h"

namespace rocket {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t digest(const float* logits) {
  Fnv64 h;
  h.update(std::string_view(reinterpret_cast<const char*>(logits), sizeof(float) * engine::kVocab));
  return h.digest();
}

struct Stream {
  int slot = 0;
  std::vector<int32_t> prompt, ref;  // the plain run's greedy tokens
  std::vector<uint64_t> ref_logits;  // digest of the logits each was picked from
  std::vector<int32_t> out;          // the speculative run's tokens so far
  int64_t pos = 0;                   // of out.back(), picked and not yet computed
};

}  // namespace

int cmd_speculate_check(HostEngine& e, const SpeculateOptions& o) {
  const int k = o.draft ? o.draft : e.plan().draft_tokens;
  if (!e.plan().draft_tokens) fail("speculate: this engine's plan does not draft (rocket build --draft K)");
  if (k < 1 || k > e.plan().draft_tokens) fail("speculate: --draft {} outside [1, {}]", k, e.plan().draft_tokens);
  const int V = int(engine::kVocab);
  std::mt19937_64 rng(o.seed);
  std::vector<Stream> streams(size_t(o.prompts));
  for (int s = 0; s < o.prompts; ++s) {
    Stream& st = streams[size_t(s)];
    st.slot = s % int(engine::kMaxStreams);
    // Lengths on both sides of a prefill chunk; distinct tokens per stream.
    st.prompt.resize(size_t(3 + (s * 13 + 7) % (2 * engine::kPrefillChunk)));
    if (o.text.empty()) {
      for (int32_t& t : st.prompt) t = int32_t(rng() % uint64_t(V));
    } else {  // windows spread through the text
      if (o.text.size() < st.prompt.size()) fail("speculate: the text has {} tokens, a prompt needs {}", o.text.size(), st.prompt.size());
      const size_t at = (o.text.size() - st.prompt.size()) * size_t(s) / size_t(std::max(1, o.prompts - 1));
      std::copy_n(o.text.begin() + long(at), st.prompt.size(), st.prompt.begin());
    }
    if (int64_t(st.prompt.size()) + o.tokens > engine::kMaxContext)
      fail("speculate: prompt + {} tokens exceed the plan's context {}", o.tokens, engine::kMaxContext);
  }
  if (o.prompts > engine::kMaxStreams) fail("speculate: {} prompts, the plan has {} stream slots", o.prompts, engine::kMaxStreams);

  // Plain greedy decoding, each stream alone in its slot.
  double plain_s = 0;
  for (Stream& st : streams) {
    e.reset_slot(st.slot);
    const float* logits = e.prefill_prompt(st.slot, st.prompt);
    int64_t pos = int64_t(st.prompt.size());
    for (int i = 0; i < o.tokens; ++i) {
      st.ref.push_back(host::argmax(logits, V));
      st.ref_logits.push_back(digest(logits));
      if (i + 1 == o.tokens) break;
      const auto t0 = Clock::now();
      e.decode(1, &st.ref.back(), &st.slot, &pos);
      plain_s += std::chrono::duration<double>(Clock::now() - t0).count();
      ++pos;
      logits = e.logits(0);
    }
  }

  // Speculative: every stream prefilled afresh, then one draft + verify step per stream in turn.
  for (Stream& st : streams) {
    e.reset_slot(st.slot);
    const float* logits = e.prefill_prompt(st.slot, st.prompt);
    st.out.push_back(host::argmax(logits, V));
    st.pos = int64_t(st.prompt.size());
  }
  int64_t drafted = 0, accepted = 0, steps = 0, plain_steps = 0, spec_tokens = 0;
  double spec_s = 0;
  std::vector<int32_t> ids(size_t(k) + 1);
  HostBatchEngine batch(e);
  std::vector<SamplingKnobs> greedy(size_t(k) + 1);
  for (SamplingKnobs& g : greedy) g.temperature = 0;
  auto mismatch = [&](const Stream& st, size_t at, const char* what) {
    std::printf("speculate: FAIL stream %d token %zu: %s (speculative %d, plain %d)\n", int(&st - streams.data()), at,
                what, st.out[at], st.ref[at]);
    return 1;
  };
  for (bool running = true; running;) {
    running = false;
    for (Stream& st : streams) {
      const int left = o.tokens - int(st.out.size());
      if (left <= 0) continue;
      running = true;
      const auto t0 = Clock::now();
      const int kk = std::min(k, left - 1);
      if (kk < 1) {  // one token to go: a plain step
        e.decode(1, &st.out.back(), &st.slot, &st.pos);
        ++plain_steps;
        st.out.push_back(host::argmax(e.logits(0), V));
        if (digest(e.logits(0)) != st.ref_logits[st.out.size() - 1]) return mismatch(st, st.out.size() - 1, "logits differ");
        ++st.pos;
        continue;
      }
      ids[0] = st.out.back();
      // The calls the server makes (HostBatchEngine: the step contract, each row's pick, accept).
      if (o.oracle < 0) {
        batch.draft(st.slot, ids[0], st.pos, kk, ids.data() + 1);
      } else {
        for (int i = 1; i <= kk; ++i) {
          const int32_t truth = st.ref[st.out.size() - 1 + size_t(i)];
          const bool wrong = std::uniform_real_distribution<double>(0, 1)(rng) < o.oracle;
          ids[size_t(i)] = wrong ? int32_t((truth + 1 + int64_t(rng() % uint64_t(V - 1))) % V) : truth;
        }
      }
      const int a = batch.verify(st.slot, ids.data(), kk, st.pos, greedy.data());
      for (int j = 0; j <= a; ++j) {
        st.out.push_back(batch.tokens()[j]);
        const size_t at = st.out.size() - 1;
        if (st.out[at] != st.ref[at]) return mismatch(st, at, "tokens differ");
        if (digest(batch.logits(j)) != st.ref_logits[at]) return mismatch(st, at, "logits differ");
      }
      // Every draft it kept is the pick before it, and the first it did not keep is not.
      for (int j = 1; j <= a; ++j)
        if (ids[size_t(j)] != batch.tokens()[j - 1]) return mismatch(st, st.out.size() - size_t(a + 1 - j), "a wrong draft kept");
      if (a < kk && ids[size_t(a) + 1] == batch.tokens()[a]) return mismatch(st, st.out.size() - 1, "a right draft dropped");
      spec_s += std::chrono::duration<double>(Clock::now() - t0).count();
      st.pos += a + 1;
      drafted += kk, accepted += a, ++steps, spec_tokens += a + 1;
    }
  }
  const int64_t plain_tokens = int64_t(o.prompts) * (o.tokens - 1);
  std::printf("speculate: %d streams (%s prompts) x %d greedy tokens, drafts of %d (%s): identical to plain decoding, logits bit for "
              "bit\n",
              o.prompts, o.text.empty() ? "random" : "text", o.tokens, k, o.oracle < 0 ? "MTP layer" : fmt::format("oracle, {:.0f}% wrong", 100 * o.oracle).c_str());
  std::printf("speculate: acceptance %.3f (%lld of %lld drafts), %.2f tokens per verify step (%lld steps + %lld plain)\n",
              drafted ? double(accepted) / double(drafted) : 0.0, (long long)accepted, (long long)drafted,
              steps ? double(accepted + steps) / double(steps) : 0.0, (long long)steps, (long long)plain_steps);
  std::printf("speculate: host time %.1f ms per token speculative (draft + verify + accept), %.1f ms plain decode\n",
              1e3 * spec_s / double(std::max<int64_t>(1, spec_tokens)), 1e3 * plain_s / double(std::max<int64_t>(1, plain_tokens)));
  return 0;
}

}  // namespace rocket
