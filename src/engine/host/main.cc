// rocket-engine: the binary `rocket build` emits for one chemistry on the host booster.
//   rocket-engine generate --prompt TEXT [--max-tokens N] [--temperature T] [--top-p P] [--top-k K] [--seed S]
//   rocket-engine parity --golden FILE.json [--full FILE.bin] [--tolerance R]
//   rocket-engine bench [--tokens N] [--context C]
//   rocket-engine buckets [--steps N]
//   rocket-engine launch|serve [--host H] [--port N] [--api-key K] [--queue N] [--prefill-budget T] [--reserve BYTES] [--max-body-bytes BYTES] [--max-json-depth N] [--force-tokens FILE (TEST-ONLY)]
// The engine directory is the parent of the binary's folder (ENGINE_DIR/bin/rocket-engine).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "boosters/profile.h"
#include "core/error.h"
#include "engine/golden.h"
#include "engine/host/cache_check.h"
#include "engine/host/host_batch_engine.h"
#include "engine/host/host_engine.h"
#include "engine/host/static_fire.h"
#include "kernels/host/sample.h"
#include "launch/launch.h"
#include "openai/prompt_builder.h"
#include "plan/step_bytes.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace rocket {
namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Args {
  std::vector<std::string> v;
  bool has(const std::string& k) const {
    for (auto& a : v) if (a == k) return true;
    return false;
  }
  std::string get(const std::string& k, const std::string& def) const {
    for (size_t i = 0; i + 1 < v.size(); ++i) if (v[i] == k) return v[i + 1];
    return def;
  }
};

int cmd_generate(const fs::path& dir, const Args& a) {
  const std::string prompt = a.get("--prompt", "");
  if (prompt.empty()) fail("generate: --prompt TEXT is required");
  const int max_tokens = std::stoi(a.get("--max-tokens", "64"));
  host::SamplingParams sp;
  sp.temperature = std::stof(a.get("--temperature", "0"));
  sp.top_p = std::stof(a.get("--top-p", "1"));
  sp.top_k = std::stoi(a.get("--top-k", "0"));
  sp.seed = std::stoull(a.get("--seed", "0"));
  const auto t_up = Clock::now();
  HostEngine e(dir.string());
  Tokenizer tok = Tokenizer::load((dir / "tokenizer.json").string());
  std::fprintf(stderr, "[engine] upright + fuel: %.2f s\n", seconds_since(t_up));
  std::vector<int32_t> ids = tok.encode(prompt);
  if (ids.empty()) fail("generate: the prompt encodes to no tokens");
  if (int64_t(ids.size()) + max_tokens > engine::kMaxContext)
    fail("generate: prompt ({} tokens) + max tokens ({}) exceed the plan's context {}", ids.size(), max_tokens,
         engine::kMaxContext);
  const std::vector<int32_t> eos = eos_token_ids(dir.string());
  std::vector<float> scratch(engine::kVocab);
  std::vector<int32_t> scratch_idx(engine::kVocab);
  const auto t0 = Clock::now();
  e.prefill_prompt(0, ids);
  const double prefill_s = seconds_since(t0);
  StreamDecoder out(tok);
  std::fputs(prompt.c_str(), stdout);
  std::fflush(stdout);
  const auto t1 = Clock::now();
  int64_t pos = int64_t(ids.size());
  const float* logits = e.logits(int((ids.size() - 1) % engine::kPrefillChunk));
  int generated = 0;
  for (; generated < max_tokens; ++generated) {
    int32_t next = host::sample(logits, int(engine::kVocab), sp, uint64_t(pos), scratch.data(), scratch_idx.data());
    if (std::find(eos.begin(), eos.end(), next) != eos.end()) break;
    std::fputs(out.push(next).c_str(), stdout);
    std::fflush(stdout);
    const int slot = 0;
    e.decode(1, &next, &slot, &pos);
    ++pos;
    logits = e.logits(0);
  }
  std::fputs(out.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  const double decode_s = seconds_since(t1);
  std::fprintf(stderr, "[engine] prefill %zu tokens in %.3f s (%.1f tok/s); decode %d tokens in %.3f s (%.1f tok/s)\n",
               ids.size(), prefill_s, ids.size() / prefill_s, generated, decode_s, generated / std::max(decode_s, 1e-9));
  return 0;
}

// Parity against HF goldens (see tools/reference/golden.py and tests/golden/README.md).
int cmd_parity(const fs::path& dir, const Args& a) {
  const Golden g = load_golden(a.get("--golden", ""), a.get("--full", ""));
  const float tol = std::stof(a.get("--tolerance", "1e-3"));
  HostEngine e(dir.string());
  const int V = int(engine::kVocab);
  bool ok = true;
  float worst_rel = 0;
  int compared = 0, skipped = 0, free_steps = 0;
  auto check = [&](const char* what, int p, size_t i, const LogitDiff& d) {
    worst_rel = std::max(worst_rel, d.rel);
    ++compared;
    if (d.rel > tol) {
      if (ok)
        std::fprintf(stderr, "FAIL %s prompt %d position %zu: |diff| %.3g (rel %.3g > %.3g) at id %d: ref %.6f got %.6f\n",
                     what, p, i, d.max_abs, d.rel, tol, d.worst_id, d.ref, d.got);
      ok = false;
    }
  };
  const int P = int(g.prompts.size());
  if (P > engine::kMaxStreams) fail("parity: {} prompts exceed the engine's {} streams", P, engine::kMaxStreams);
  // 1) Teacher-forced prefill over prompt + reference greedy tokens, logits at every position.
  for (int p = 0; p < P; ++p) {
    const GoldenPrompt& gp = g.prompts[p];
    std::vector<int32_t> seq = gp.prompt_ids;
    seq.insert(seq.end(), gp.greedy_ids.begin(), gp.greedy_ids.end());
    seq.pop_back();  // the last greedy token has no position to predict from
    e.reset_slot(p);
    for (size_t at = 0; at < seq.size(); at += engine::kPrefillChunk) {
      const int n = int(std::min<size_t>(engine::kPrefillChunk, seq.size() - at));
      e.prefill(p, seq.data() + at, n, int64_t(at), 0);
      for (int r = 0; r < n; ++r) {
        check("prefill", p, at + r, compare_logits(gp.positions[at + r], g.sample_stride, e.logits(r), V));
        if (at + r + 1 == gp.prompt_ids.size() && !gp.full_last_prompt.empty())
          check("prefill-full", p, at + r, compare_full(gp.full_last_prompt, e.logits(r), V));
      }
    }
  }
  // 2) Free-running greedy, all prompts decoding together as one bucket of distinct streams. A step
  // whose token differs from the reference's is a failure unless the reference's own top-1/top-2
  // margin there is within the tolerance band (then it is counted as skipped and the stream is
  // re-synchronised on the reference token).
  std::vector<int64_t> pos(P);
  std::vector<int32_t> next(P);
  std::vector<int> slots(P);
  for (int p = 0; p < P; ++p) {
    slots[p] = p;
    e.reset_slot(p);
    const auto& ids = g.prompts[p].prompt_ids;
    e.prefill_prompt(p, ids);
    const float* l = e.logits(int((ids.size() - 1) % engine::kPrefillChunk));
    next[p] = host::argmax(l, V);
    pos[p] = int64_t(ids.size());
  }
  const size_t steps = g.prompts[0].greedy_ids.size();
  for (size_t s = 0; s < steps; ++s) {
    for (int p = 0; p < P; ++p) {
      const GoldenPrompt& gp = g.prompts[p];
      if (s >= gp.greedy_ids.size()) continue;
      const GoldenPosition& ref = gp.positions[gp.prompt_ids.size() - 1 + s];
      ++free_steps;
      if (next[p] != gp.greedy_ids[s]) {
        const float scale = std::max(1.0f, std::fabs(ref.top_logits[0]));
        if (ref.margin <= 2 * tol * scale) {
          ++skipped;
          next[p] = gp.greedy_ids[s];
        } else {
          if (ok)
            std::fprintf(stderr, "FAIL greedy prompt %d step %zu: got %d, reference %d (reference margin %.4f)\n", p, s,
                         next[p], gp.greedy_ids[s], ref.margin);
          ok = false;
          next[p] = gp.greedy_ids[s];
        }
      }
    }
    if (s + 1 == steps) break;
    e.decode(P, next.data(), slots.data(), pos.data());
    for (int p = 0; p < P; ++p) {
      const GoldenPrompt& gp = g.prompts[p];
      if (s + 1 < gp.greedy_ids.size())
        check("decode", p, gp.prompt_ids.size() + s, compare_logits(gp.positions[gp.prompt_ids.size() + s], g.sample_stride, e.logits(p), V));
      next[p] = host::argmax(e.logits(p), V);
      ++pos[p];
    }
  }
  std::printf("parity %s: %d logit rows compared, worst relative difference %.3g (tolerance %.3g); "
              "%d free-running greedy steps, %d skipped for a reference margin within tolerance\n",
              ok ? "PASS" : "FAIL", compared, worst_rel, tol, free_steps, skipped);
  return ok ? 0 : 1;
}

// Every compiled bucket gives each stream exactly the logits it gets decoding alone (bucket 1):
// rows never leak into each other, padding rows write only the padding slot, and the kernels are
// batch-invariant. Streams get distinct prompts and distinct tokens.
int cmd_buckets(const fs::path& dir, const Args& a) {
  const int steps = std::stoi(a.get("--steps", "3"));
  HostEngine e(dir.string());
  const int V = int(engine::kVocab);
  auto prompt_of = [](int s) {
    std::vector<int32_t> p(5 + s % 7);
    for (size_t t = 0; t < p.size(); ++t) p[t] = int32_t((977 * (s + 1) + 131 * t) % 150000);
    return p;
  };
  // Reference: each stream alone, bucket 1, in slot 0.
  std::vector<std::vector<std::vector<float>>> alone(engine::kMaxStreams);
  for (int s = 0; s < engine::kMaxStreams; ++s) {
    e.reset_slot(0);
    const auto p = prompt_of(s);
    e.prefill_prompt(0, p);
    int64_t pos = int64_t(p.size());
    int32_t id = int32_t(300 + 17 * s);
    const int slot = 0;
    for (int t = 0; t < steps; ++t, ++pos) {
      e.decode(1, &id, &slot, &pos);
      alone[s].emplace_back(e.logits(0), e.logits(0) + V);
      id = host::argmax(e.logits(0), V);
    }
  }
  int bad = 0;
  for (int n : {1, 2, 3, 4, 5, 8, 13, 16, 31, 32}) {
    std::vector<int> slots(n);
    std::vector<int64_t> pos(n);
    std::vector<int32_t> ids(n);
    for (int s = 0; s < n; ++s) {
      slots[s] = engine::kMaxStreams - 1 - s;  // not the slots the reference used
      e.reset_slot(slots[s]);
      const auto p = prompt_of(s);
      e.prefill_prompt(slots[s], p);
      pos[s] = int64_t(p.size());
      ids[s] = int32_t(300 + 17 * s);
    }
    for (int t = 0; t < steps; ++t) {
      e.decode(n, ids.data(), slots.data(), pos.data());
      for (int s = 0; s < n; ++s) {
        if (std::memcmp(e.logits(s), alone[s][t].data(), sizeof(float) * V) != 0) {
          if (!bad) std::fprintf(stderr, "FAIL %d streams (bucket %d): stream %d step %d differs from decoding alone\n", n,
                                 e.bucket_for(n), s, t);
          ++bad;
        }
        ids[s] = host::argmax(e.logits(s), V);
        ++pos[s];
      }
    }
  }
  std::printf("buckets %s: every stream's logits %s bitwise to decoding alone, for 1..%d streams\n",
              bad ? "FAIL" : "PASS", bad ? "do not match" : "match", int(engine::kMaxStreams));
  return bad ? 1 : 0;
}

// Decode throughput at every bucket, distinct tokens per stream, from a context of --context tokens,
// as a fraction of the roofline: bytes per step over the copy bandwidth measured in the same run.
int cmd_bench(const fs::path& dir, const Args& a) {
  const int tokens = std::stoi(a.get("--tokens", "16"));
  const int context = std::stoi(a.get("--context", "64"));
  HostEngine e(dir.string());
  // 1 GiB per buffer: well past any last-level cache, so this is DRAM bandwidth.
  const double copy_gbps = probe_host().copy_gbps;
  std::printf("host copy bandwidth (read+write, 1 GiB): %.1f GB/s\n", copy_gbps);
  std::printf("bucket  ms/step  MB/step  GB/s  roofline  tok/s(aggregate)  tok/s(per stream)\n");
  for (int b : engine::kBuckets) {
    std::vector<int> slots(b);
    std::vector<int64_t> pos(b);
    std::vector<int32_t> ids(b);
    for (int s = 0; s < b; ++s) {
      slots[s] = s;
      e.reset_slot(s);
      std::vector<int32_t> prompt(context);
      for (int t = 0; t < context; ++t) prompt[t] = int32_t((1000 + 7919 * (s * context + t)) % 150000);
      e.prefill_prompt(s, prompt);
      pos[s] = context;
      ids[s] = int32_t(100 + 31 * s);
    }
    const auto t0 = Clock::now();
    for (int t = 0; t < tokens; ++t) {
      e.decode(b, ids.data(), slots.data(), pos.data());
      for (int s = 0; s < b; ++s) ids[s] = host::argmax(e.logits(s), int(engine::kVocab)), ++pos[s];
    }
    const double sec = seconds_since(t0) / tokens;
    const double bytes = step_bytes(e.plan(), b, context + tokens / 2).total();
    const double gbps = bytes / sec / 1e9;
    std::printf("%6d  %7.2f  %7.1f  %4.1f  %7.1f%%  %16.1f  %17.1f\n", b, 1e3 * sec, bytes / 1e6, gbps,
                100.0 * gbps / copy_gbps, b / sec, 1.0 / sec);
  }
  return 0;
}

// The countdown on the host engine, then the OpenAI-compatible server (launch/launch.h).
int cmd_launch(const fs::path& dir, const Args& a) {
  std::unique_ptr<HostEngine> engine;
  std::unique_ptr<HostBatchEngine> batch;
  LaunchSteps steps{
      .upright = [&](uint64_t reserve_bytes) {
        engine = std::make_unique<HostEngine>(dir.string(), reserve_bytes);
        const Plan& p = engine->plan();
        return fmt::format("plan {} on {}: residency {:.1f} MiB, {} streams, context {}", p.fingerprint, p.booster,
                           p.arena_bytes / 1048576.0, p.max_streams, p.max_context);
      },
      .fuel = [&] {
        const auto t0 = Clock::now();
        const uint64_t bytes = engine->load_weights();
        const double s = seconds_since(t0);
        batch = std::make_unique<HostBatchEngine>(*engine);
        return fmt::format("{:.1f} MiB of weights resident in {:.3f} s ({:.2f} GB/s)", bytes / 1048576.0, s,
                           bytes / std::max(s, 1e-9) / 1e9);
      },
      .static_fire = [&] { return static_fire(*engine); },
      .engine = [&]() -> BatchEngine& { return *batch; },
      .max_context = engine::kMaxContext,
  };
  return launch(dir, a.v, steps);
}

}  // namespace
}  // namespace rocket

int main(int argc, char** argv) {
  using namespace rocket;
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr,
                 "usage: rocket-engine generate --prompt TEXT [--max-tokens N] [--temperature T] [--top-p P] "
                 "[--top-k K] [--seed S]\n"
                 "       rocket-engine parity --golden FILE.json [--full FILE.bin] [--tolerance R]\n"
                 "       rocket-engine bench [--tokens N] [--context C]\n"
                 "       rocket-engine buckets [--steps N]\n"
                 "       rocket-engine cachecheck\n"
                 "       rocket-engine %s\n", kLaunchUsage);
    return argc < 2 ? 2 : 0;
  }
  const fs::path dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  Args a{std::vector<std::string>(argv + 2, argv + argc)};
  const std::string cmd = argv[1];
  try {
    if (cmd == "generate") return cmd_generate(dir, a);
    if (cmd == "parity") return cmd_parity(dir, a);
    if (cmd == "bench") return cmd_bench(dir, a);
    if (cmd == "buckets") return cmd_buckets(dir, a);
    if (cmd == "cachecheck") {
      HostEngine e(dir.string());
      return cmd_cache_check(e);
    }
    if (cmd == "launch" || cmd == "serve") return cmd_launch(dir, a);
    std::fprintf(stderr, "rocket-engine: unknown command '%s' (try --help)\n", cmd.c_str());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "rocket-engine: %s\n", e.what());
    return 1;
  } catch (const std::logic_error& e) {  // std::stoi / std::stof on a malformed option
    std::fprintf(stderr, "rocket-engine: bad number in an option (%s)\n", e.what());
    return 2;
  }
}
