// The host engine's binary (engine/engine_binary.h): its own commands generate, parity, bench,
// score, buckets, cachecheck, imagecheck, speculate and profile, and its countdown steps; cli/rocket_engine.cc adds launch (also
// spelled serve) and front and dispatches. `rocket-engine COMMAND --help` lists each one's flags.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "boosters/profile.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/read_file.h"
#include "engine/engine_binary.h"
#include "engine/generate_options.h"
#include "engine/image_check.h"
#include "fuel/golden.h"
#include "engine/parity.h"
#include "engine/score.h"
#include "engine/host/cache_check.h"
#include "engine/host/host_batch_engine.h"
#include "engine/host/host_engine.h"
#include "engine/host/profile_run.h"
#include "engine/host/speculate_check.h"
#include "engine/host/static_fire.h"
#include "kernels/host/sample.h"
#include "openai/prompt_builder.h"
#include "plan/step_bytes.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace rocket {
namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int cmd_generate(const fs::path& dir, const std::vector<std::string>& args) {
  GenerateOptions o;
  CLI::App cli("Streams the prompt's continuation to stdout.", "rocket-engine generate");
  add_generate_options(cli, o);
  if (const auto rc = parse_command(cli, args)) return *rc;
  const std::string& prompt = o.prompt;
  const int max_tokens = o.max_tokens;
  SamplingKnobs sp;
  sp.temperature = o.temperature;
  sp.top_p = o.top_p;
  sp.top_k = o.top_k;
  sp.seed = o.seed;
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
    sp.counter = uint64_t(pos);
    int32_t next = host::sample(logits, int(engine::kVocab), sp, scratch.data(), scratch_idx.data());
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

// Parity against the HF goldens (engine/parity.h).
int cmd_parity(const fs::path& dir, const std::vector<std::string>& args) {
  float tolerance = 1e-3f;
  Golden g;
  if (const auto rc = parse_parity_command(args, tolerance, "largest relative logit difference allowed", g)) return *rc;
  HostEngine e(dir.string());
  HostBatchEngine batch(e);
  const ParityResult r = run_parity(
      batch,
      [&](int slot, const int32_t* ids, int n, int64_t pos0) {
        e.prefill(slot, ids, n, pos0, 0);
        return e.logits(0);
      },
      g, tolerance);
  std::printf("%s\n", r.summary().c_str());
  return r.ok ? 0 : 1;
}

// Next-token distributions or greedy continuations for the quality gate (engine/score.h).
int cmd_score(const fs::path& dir, const std::vector<std::string>& args) {
  ScoreWindows w;
  int greedy = 0;
  if (const auto rc = parse_score_command(args, w, greedy)) return *rc;
  HostEngine e(dir.string());
  HostBatchEngine batch(e);
  run_score(
      batch,
      [&](int slot, const int32_t* ids, int n, int64_t pos0) {
        e.prefill(slot, ids, n, pos0, 0);
        return e.logits(0);
      },
      w, greedy, stdout);
  return 0;
}

// Every compiled bucket gives each stream exactly the logits it gets decoding alone (bucket 1):
// rows never leak into each other, padding rows write only the padding slot, and the kernels are
// batch-invariant. Streams get distinct prompts and distinct tokens.
int cmd_buckets(const fs::path& dir, const std::vector<std::string>& args) {
  int steps = 3;
  CLI::App cli("Every bucket's rows give each stream's logits bitwise as decoding alone.", "rocket-engine buckets");
  cli.add_option("--steps", steps, "decode steps per stream")->check(at_least(1))->capture_default_str();
  if (const auto rc = parse_command(cli, args)) return *rc;
  HostEngine e(dir.string());
  const int V = int(engine::kVocab);
  auto prompt_of = [](int s) {
    std::vector<int32_t> p(5 + s % 7);
    for (size_t t = 0; t < p.size(); ++t) p[t] = int32_t((977 * (s + 1) + 131 * t) % engine::kVocab);
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
int cmd_bench(const fs::path& dir, const std::vector<std::string>& args) {
  int tokens = 16, context = 64;
  CLI::App cli("Decode throughput at every bucket against the copy-bandwidth roofline (plan/step_bytes.h).",
               "rocket-engine bench");
  cli.add_option("--tokens", tokens, "decode steps timed per bucket")->check(at_least(1))->capture_default_str();
  cli.add_option("--context", context, "prompt tokens each stream decodes from")->check(at_least(1))->capture_default_str();
  if (const auto rc = parse_command(cli, args)) return *rc;
  if (context + tokens > engine::kMaxContext)
    fail("bench: --context {} + --tokens {} exceed the plan's context {}", context, tokens, engine::kMaxContext);
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
      for (int t = 0; t < context; ++t) prompt[t] = int32_t((1000 + 7919 * (s * context + t)) % engine::kVocab);
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

// The countdown's steps on the host engine (launch/launch.h serves over them).
LaunchSteps launch_steps(const fs::path& dir) {
  struct Rocket {
    std::unique_ptr<HostEngine> engine;
    std::unique_ptr<HostBatchEngine> batch;
  };
  auto r = std::make_shared<Rocket>();
  return LaunchSteps{
      .upright = [r, dir](uint64_t reserve_bytes) {
        r->engine = std::make_unique<HostEngine>(dir.string(), reserve_bytes);
        const Plan& p = r->engine->plan();
        return fmt::format("plan {} on {}: residency {:.1f} MiB, {} streams, context {}", p.fingerprint, p.booster,
                           p.arena_bytes / 1048576.0, p.max_streams, p.max_context);
      },
      .fuel = [r] {
        const auto t0 = Clock::now();
        const uint64_t bytes = r->engine->load_weights();
        const double s = seconds_since(t0);
        r->batch = std::make_unique<HostBatchEngine>(*r->engine);
        return fmt::format("{:.1f} MiB of weights resident in {:.3f} s ({:.2f} GB/s)", bytes / 1048576.0, s,
                           bytes / std::max(s, 1e-9) / 1e9);
      },
      .static_fire = [r] { return static_fire(*r->engine); },
      .engine = [r]() -> BatchEngine& { return *r->batch; },
      .budget = [r] { return r->engine->budget(); },
      .max_context = engine::kMaxContext,
  };
}

int cmd_cachecheck(const fs::path& dir, const std::vector<std::string>& args) {
  CLI::App cli("A cached prefix and a fork give the cold run's logits bit for bit.", "rocket-engine cachecheck");
  if (const auto rc = parse_command(cli, args)) return *rc;
  HostEngine e(dir.string());
  return cmd_cache_check(e);
}

// Prompts with images (engine/image_check.h): FP32, so every comparison but decode against prefill is
// bit for bit; the tolerance bounds the golden's.
int cmd_imagecheck(const fs::path& dir, const std::vector<std::string>& args) {
  ImageCheckOptions o{.exact = true};
  if (const auto rc = parse_image_check_command(args, o, "largest logit gap from the golden over the largest reference logit"))
    return *rc;
  HostEngine e(dir.string());
  HostBatchEngine batch(e);
  return run_image_check(batch, o);
}

int cmd_speculate(const fs::path& dir, const std::vector<std::string>& args) {
  SpeculateOptions o;
  CLI::App cli("Greedy decoding with MTP drafts verified k+1 rows at a time equals plain greedy decoding, token and "
               "logit; reports the acceptance.",
               "rocket-engine speculate");
  cli.add_option("--prompts", o.prompts, "streams, each a random prompt in its own slot")->check(at_least(1))->capture_default_str();
  cli.add_option("--tokens", o.tokens, "greedy tokens per stream")->check(at_least(2))->capture_default_str();
  cli.add_option("--draft", o.draft, "tokens per draft (0: the plan's draft_tokens)")->check(at_least(0))->capture_default_str();
  cli.add_option("--oracle", o.oracle,
                 "draft the plain run's tokens with this fraction made wrong, instead of the MTP layer (every accepted "
                 "length occurs on random weights; a fixed acceptance for timing)")
      ->check(CLI::Range(0.0, 1.0));
  cli.add_option("--seed", o.seed, "prompt tokens and wrong drafts")->capture_default_str();
  std::string text;
  cli.add_option("--text", text, "prompts from windows of this text (held-out text: an acceptance that means something)")
      ->check(CLI::ExistingFile);
  if (const auto rc = parse_command(cli, args)) return *rc;
  HostEngine e(dir.string());
  if (!text.empty()) o.text = Tokenizer::load((dir / "tokenizer.json").string()).encode(read_file(text));
  return cmd_speculate_check(e, o);
}

}  // namespace

EngineBinary engine_binary() {
  return EngineBinary{
      .commands = {{"generate", "stream a prompt's continuation", cmd_generate},
                   {"parity", "logits and greedy tokens against the HF reference's goldens", cmd_parity},
                   {"score", "next-token log-probabilities over token windows, for rocket gate", cmd_score},
                   {"bench", "decode throughput at every bucket against the roofline", cmd_bench},
                   {"buckets", "every bucket gives each stream the logits of decoding alone", cmd_buckets},
                   {"cachecheck", "a cached prefix and a fork give the cold run's logits bit for bit", cmd_cachecheck},
                   {"imagecheck", "prompts with images run in prefill, batched as alone, at the rope delta",
                    cmd_imagecheck},
                   {"speculate", "MTP drafts verified in one step give plain greedy decoding's tokens (a drafting plan)",
                    cmd_speculate},
                   {"profile", "run the fuel over a corpus and write its co-activation profile", cmd_profile}},
      .replicas_on = "",  // the host's replicas share its cores: nothing to say
      .about = "",
      .launch_steps = launch_steps,
  };
}

}  // namespace rocket
