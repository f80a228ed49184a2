#include "compiler/compiler.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "boosters/profile.h"
#include "compiler/codegen.h"
#include "compiler/condition.h"
#include "compiler/kernel_selection.h"
#include "compiler/memory_map.h"
#include "compiler/placement.h"
#include "compiler/precision_map.h"
#include "compiler/toolchain.h"
#include "core/error.h"
#include "core/shell_quote.h"
#include "core/progress.h"
#include "core/staged_dir.h"
#include "fuel/golden.h"
#include "fuel/coactivation.h"
#include "fuel/fuel.h"
#include "kernels/tiling/dense.h"
#include "template/chat_template.h"

namespace fs = std::filesystem;

namespace rocket {

std::string memory_map_difference(const Plan& a, const Plan& b) {
  if (a.fingerprint != b.fingerprint) return fmt::format("chemistry {} vs {}", a.fingerprint, b.fingerprint);
  if (a.booster != b.booster) return fmt::format("booster {} vs {}", a.booster, b.booster);
  if (a.blob_bytes != b.blob_bytes || a.arena_bytes != b.arena_bytes)
    return fmt::format("blob / arena bytes {} / {} vs {} / {}", a.blob_bytes, a.arena_bytes, b.blob_bytes, b.arena_bytes);
  if (a.tensors.size() != b.tensors.size() || a.buffers.size() != b.buffers.size())
    return fmt::format("{} tensor parts and {} buffers vs {} and {}", a.tensors.size(), a.buffers.size(), b.tensors.size(),
                       b.buffers.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const PlanTensor &x = a.tensors[i], &y = b.tensors[i];
    if (x.name != y.name || x.offset != y.offset || x.bytes != y.bytes || x.dtype != y.dtype || x.shape != y.shape)
      return fmt::format("tensor {} at {} ({} bytes) vs {} at {} ({} bytes)", x.name, x.offset, x.bytes, y.name, y.offset, y.bytes);
  }
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const PlanBuffer &x = a.buffers[i], &y = b.buffers[i];
    if (x.name != y.name || x.offset != y.offset || x.bytes != y.bytes)
      return fmt::format("buffer {} at {} ({} bytes) vs {} at {} ({} bytes)", x.name, x.offset, x.bytes, y.name, y.offset, y.bytes);
  }
  return "";
}

namespace {

HardwareProfile profile_for(const BuildOptions& opt) {
  if (!opt.profile.empty()) {
    HardwareProfile p = load_profile(opt.profile);
    if (p.booster != opt.booster)
      fail("{}: profile is for booster '{}', building for '{}'", opt.profile, p.booster, opt.booster);
    return p;
  }
  if (opt.booster == "host") return probe_host_memory();  // the host plan needs memory, not bandwidth
  const fs::path committed = fs::path(source_dir()) / "boosters" / (opt.booster + ".json");
  if (!fs::exists(committed))
    fail("no hardware profile for booster '{}': pass --profile FILE (made by `rocket probe --booster {}` on that "
         "machine) or commit {}", opt.booster, opt.booster, committed.string());
  return load_profile(committed);
}

// The engine renders the fuel's chat template for every request; a template using anything the
// template engine does not implement is refused here, at build time, never at request time.
void check_chat_template(const fs::path& fuel_dir) {
  const fs::path path = fuel_dir / "tokenizer_config.json";
  std::ifstream f(path);
  if (!f) return;  // no tokenizer config: the engine serves completions only
  const auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("{}: not valid JSON", path.string());
  if (!j.contains("chat_template") || !j["chat_template"].is_string()) return;
  try {
    ChatTemplate::compile(j["chat_template"].get<std::string>());
  } catch (const Error& e) {
    fail("{}: chat_template is not supported: {}", path.string(), e.what());
  }
}

// The static-fire token: of the golden's prompts, the one whose first greedy token leads by the
// widest margin, so that any engine within its logit tolerance reproduces it.
StaticFire static_fire_from_golden(const std::string& path, const Chemistry& chem) {
  const Golden g = load_golden(path, "");
  StaticFire best;
  for (const GoldenPrompt& p : g.prompts) {
    if (p.prompt_ids.empty() || p.greedy_ids.empty() || p.positions.size() < p.prompt_ids.size()) continue;
    const float margin = p.positions[p.prompt_ids.size() - 1].margin;
    if (best.prompt.empty() || margin > best.margin)
      best = StaticFire{p.prompt_ids, p.greedy_ids[0], margin, fs::absolute(path).string()};
  }
  if (best.prompt.empty()) fail("{}: no prompt with a greedy token to take the static-fire check from", path);
  if (g.vocab != chem.vocab)
    fail("{}: golden vectors of a {}-token vocabulary, this fuel has {}: a different model", path, g.vocab, chem.vocab);
  return best;
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p);
  f << s;
  if (!f) fail("{}: write failed", p.string());
}

nlohmann::json read_config(const std::string& dir) {
  const fs::path path = fs::path(dir) / "config.json";
  std::ifstream f(path);
  if (!f) fail("{}: missing (a fuel directory needs an HF config.json)", path.string());
  const auto config = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) fail("{}: not valid JSON", path.string());
  return config;
}

// The chemistry of a fuel directory from its config.json and quantisation files alone.
Chemistry chemistry_of_config(const std::string& dir) {
  const nlohmann::json config = read_config(dir);
  return chemistry_from_config(config, detect_weight_format(dir, config), (fs::path(dir) / "config.json").string());
}

// The vision tower a build carries: the fuel's, where its checkpoint holds one; under --no-weights the
// one config.json declares (the --weights-only build after it refuses a fuel without it: its plan would
// differ). Recorded with the config's image tokens and the fuel's image processor.
std::optional<PlanVision> plan_vision_of(const BuildOptions& opt, const Fuel* fuel, const Chemistry& chem) {
  const std::string path = (fs::path(opt.fuel_dir) / "config.json").string();
  const nlohmann::json config = fuel ? fuel->config() : read_config(opt.fuel_dir);
  const std::optional<VisionTowerConfig> tower = fuel ? fuel->vision() : vision_tower_config(config, path);
  if (!tower) return std::nullopt;
  PlanVision v = plan_vision_of_config(config, *tower, chem.vocab, path);
  read_vision_processor(opt.fuel_dir, v);
  return v;
}

// --draft K: the checkpoint's MTP layer drafts K tokens per step (docs/speculative.md), on the
// engines that run it.
void check_drafting(const BuildOptions& opt, const Chemistry& chem) {
  if (!opt.draft_tokens) return;
  if (opt.draft_tokens < 1 || opt.draft_tokens > kMaxDraftTokens)
    fail("build: --draft {} outside [1, {}] (tokens the MTP layer proposes per step)", opt.draft_tokens, kMaxDraftTokens);
  if (chem.mtp_layers < 1)
    fail("build: --draft {}: {} stores no MTP layer (its config's mtp_num_hidden_layers is 0), nothing drafts", opt.draft_tokens,
         opt.fuel_dir);
  if (opt.booster != "host")
    fail("build: --draft: the {} engine has no draft and verify steps yet (the host engine drafts)", opt.booster);
  if (opt.arrangement == kSplit) fail("build: --draft: a split rocket does not draft (its MTP layer's experts are not placed)");
}

// build --weights-only: the weights of a carried engine directory, conditioned from the full fuel.
void build_weights(const BuildOptions& opt) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const fs::path out(opt.out);
  const Plan carried = Plan::load((out / "plan.json").string());
  if (carried.booster != opt.booster)
    fail("build --weights-only: {} is an engine for booster '{}', not '{}'", opt.out, carried.booster, opt.booster);
  Fuel fuel = Fuel::open(opt.fuel_dir);
  Chemistry chem = fuel.chemistry();
  chem.precision_overrides = carried.chemistry.precision_overrides;  // the carried plan's map
  // The carried plan's tower as it records it (an h200 plan's lowered pixel bound stays as it is).
  PlanOptions po{.booster = carried.booster, .buckets = carried.buckets, .max_context = carried.max_context,
                 .prefill_chunk = carried.prefill_chunk, .state_snapshots = carried.state_snapshots,
                 .draft_tokens = carried.draft_tokens, .limits = carried.limits,
                 .expert_units = carried.expert_order.units, .vision = carried.vision};
  if (carried.vision && !fuel.vision())
    fail("build --weights-only: {} carries a vision tower, {} holds none: build the engine from this fuel", opt.out,
         opt.fuel_dir);
  const Plan plan = plan_memory(chem, po);
  if (const std::string d = memory_map_difference(plan, carried); !d.empty())
    fail("build --weights-only: the plan of {} differs from {}/plan.json ({}): build the engine from this fuel", opt.fuel_dir,
         opt.out, d);
  const fs::path tmp = out / "weights.blob.tmp";
  condition_weights(fuel, carried, tmp.string());
  fs::rename(tmp, out / "weights.blob");
  std::fprintf(stderr, "weights of %s written to %s in %.1f s\n", opt.fuel_dir.c_str(), (out / "weights.blob").c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count());
}

// Where the experts go: each layer's order in the blob and, split, each booster's share.
struct Placement {
  std::vector<std::vector<int>> units;  // [layer][expert] = unit; empty: the identity
  PlanBoosters boosters;                // all but residency and exchange, which need the memory map
  std::string source;                   // the profile's absolute path, or ""
};

Placement place(const BuildOptions& opt, const Chemistry& chem, const Fuel* fuel, const HardwareProfile& hw) {
  const int N = opt.boosters, E = chem.experts;
  if (N < 1 || N > 64) fail("build: --boosters {} outside [1, 64]", N);
  if (opt.arrangement != kReplicated && opt.arrangement != kSplit)
    fail("build: unknown arrangement '{}' (expected {} or {})", opt.arrangement, kReplicated, kSplit);
  const bool split = opt.arrangement == kSplit;
  if (split && N < 2) fail("build: --arrangement split spans boosters: give --boosters N with N >= 2");
  if (split && E % N != 0)
    fail("build: --arrangement split over {} boosters: the fuel's {} experts per layer do not divide evenly (every "
         "booster holds the same number)", N, E);
  Placement pl;
  std::optional<CoactivationProfile> profile;
  if (!opt.coactivation.empty()) {
    profile = CoactivationProfile::load(opt.coactivation);
    std::string fp = "(not read: --no-weights)";
    if (fuel) fp = fuel_fingerprint(chem, [&](const std::string& name) {
      const TensorView v = fuel->tensor(name);
      return std::span<const uint8_t>(v.data, size_t(v.nbytes));
    });
    const std::string note = check_profile_fits(*profile, chem, fp, opt.coactivation);
    std::fprintf(stderr, "coactivation: %s, %lld tokens of %s%s%s\n", opt.coactivation.c_str(),
                 static_cast<long long>(profile->tokens(0)), profile->corpus().path.c_str(), note.empty() ? "" : "; ",
                 note.c_str());
    pl.source = fs::absolute(opt.coactivation).string();
  }
  pl.boosters.count = N;
  pl.boosters.arrangement = opt.arrangement;
  int reordered = 0;
  std::vector<std::vector<int>> units(size_t(chem.layers));
  for (int l = 0; l < chem.layers; ++l) {
    std::vector<int> order;
    if (split) {
      pl.boosters.placement.push_back(place_experts(profile ? &*profile : nullptr, l, E, N));
      for (const auto& on : pl.boosters.placement.back()) order.insert(order.end(), on.begin(), on.end());
    } else if (profile) {
      order = coactivation_order(*profile, l);
    } else {
      for (int e = 0; e < E; ++e) order.push_back(e);
    }
    units[size_t(l)] = units_of_order(order);
    for (int e = 0; e < E; ++e)
      if (order[size_t(e)] != e) {
        ++reordered;
        break;
      }
  }
  if (reordered) pl.units = std::move(units);
  if (opt.booster == "h200" && pl.boosters.present()) pl.boosters.device_name = hw.device_name;
  if (profile)
    std::fprintf(stderr, "experts: %d of %d layers ordered by co-activation%s\n", reordered, chem.layers,
                 split ? fmt::format(", placed on {} boosters", N).c_str() : "");
  return pl;
}

}  // namespace

void build(const BuildOptions& opt) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  if (opt.fuel_dir.empty() || opt.out.empty()) fail("build: FUEL_DIR and --out ENGINE_DIR are required");
  if (opt.booster != "host" && opt.booster != "h200") fail("build: unknown booster '{}' (expected host or h200)", opt.booster);
  if (opt.no_weights && opt.weights_only) fail("build: --no-weights and --weights-only exclude each other");
  if (opt.weights_only) return build_weights(opt);
  std::optional<Fuel> fuel;
  if (!opt.no_weights) fuel.emplace(Fuel::open(opt.fuel_dir));
  Chemistry chem = fuel ? fuel->chemistry() : chemistry_of_config(opt.fuel_dir);
  nlohmann::json precision_gate;
  if (!opt.gate.empty() && opt.precision.empty())
    fail("build: --gate judges a precision map: give the map it passed with --precision");
  if (!opt.precision.empty()) {
    const std::string fuel_fingerprint = chem.fingerprint();
    apply_precision_map(chem, opt.precision, opt.booster);
    if (!opt.gate.empty()) precision_gate = admit_precision_map(chem, fuel_fingerprint, opt.gate);
    std::fprintf(stderr, "precision map: %s converted from the fuel's BF16 weights; %s\n",
                 precision_map_spec(chem).empty() ? "nothing" : precision_map_spec(chem).c_str(),
                 opt.gate.empty() ? "not gated (rocket gate it against the BF16 engine, then build --gate REPORT)"
                                  : ("passed the gate of " + opt.gate).c_str());
  }
  check_chat_template(opt.fuel_dir);
  if (opt.booster == "h200") check_h200_precisions(chem);
  check_drafting(opt, chem);
  const HardwareProfile hw = profile_for(opt);

  PlanOptions po;
  po.booster = opt.booster;
  po.max_context = opt.max_context;
  po.state_snapshots = opt.state_snapshots;
  po.prefill_chunk = opt.prefill_chunk;
  po.draft_tokens = opt.draft_tokens;
  // The h200 decode kernels run buckets up to the dense register form's rows (kernels/tiling/dense.h).
  const int kernel_rows = opt.booster == "h200" ? tiling::kDenseMaxRows : 128;
  if (opt.max_streams) {
    if (opt.max_streams < 1 || opt.max_streams > 128 || (opt.max_streams & (opt.max_streams - 1)) != 0)
      fail("build: --max-streams {} is not a power of two in [1, 128] (the decode buckets are 1, 2, 4, ... it)", opt.max_streams);
    if (opt.max_streams > kernel_rows)
      fail("build: --max-streams {}: the {} engine's decode kernels run buckets of at most {} rows", opt.max_streams,
           opt.booster, kernel_rows);
    po.buckets = buckets_up_to(opt.max_streams);
  }
  // Both engines run a fuel's vision tower (BF16, after the text model in the blob). The h200 one
  // only at the head dims its vision attention is instantiated for, and one image within one prefill
  // piece: plan_memory lowers the processor's max_pixels to the chunk and sizes the tower's buffers.
  po.vision = plan_vision_of(opt, fuel ? &*fuel : nullptr, chem);
  if (po.vision && opt.booster == "h200") check_h200_vision(*po.vision, (fs::path(opt.fuel_dir) / "config.json").string());
  const Placement placement = place(opt, chem, fuel ? &*fuel : nullptr, hw);
  po.expert_units = placement.units;
  // Only the h200 kernels are tiled; a host plan records no limits, so it does not depend on the
  // machine it was built on.
  if (opt.booster == "h200") po.limits = booster_limits(hw);
  // Unasked, an h200 plan decodes as many streams as its memory holds (the host keeps 32: its plan
  // does not depend on the machine). A split plan holds less than its arena per booster, so this never
  // over-commits one.
  if (opt.booster == "h200" && !opt.max_streams) po.buckets = buckets_up_to(h200_max_streams(chem, po, hw.usable_bytes()));
  Plan plan = plan_memory(chem, po);
  plan.fuel_dir = fs::absolute(opt.fuel_dir).string();
  if (fuel) {
    plan.fuel_layout = fmt::format("{} names, {} experts", fuel->layout() == Layout::kText ? "text" : "multimodal",
                                   expert_layout_name(fuel->expert_layout()));
    plan.unused_tensors = fuel->unused();
    // A drafting plan loads the MTP layer: it is no longer an unused part.
    if (plan.draft_tokens) std::erase_if(plan.unused_tensors, [](const UnusedTensors& u) { return u.part == "mtp"; });
    // A plan that carries the tower loads it: no longer an unused part either.
    if (plan.vision) std::erase_if(plan.unused_tensors, [](const UnusedTensors& u) { return u.part == "vision"; });
  }
  plan.precision_gate = precision_gate;
  plan.kernels = select_kernels(plan);
  if (!opt.golden.empty()) plan.static_fire = static_fire_from_golden(opt.golden, chem);
  plan.boosters = placement.boosters;
  if (!plan.expert_order.units.empty()) plan.expert_order.source = placement.source;
  if (plan.boosters.arrangement == kSplit) plan_split(plan);
  plan.validate("plan");
  const uint64_t usable = hw.usable_bytes();
  // A split booster holds its own experts only.
  const uint64_t residency = plan.boosters.arrangement == kSplit ? plan.boosters.residency : plan.arena_bytes;
  std::fprintf(stderr, "plan: residency %s (weights %s + runtime %s); %s usable on %s (%s)\n",
               Progress::human(plan.arena_bytes).c_str(), Progress::human(plan.blob_bytes).c_str(),
               Progress::human(plan.arena_bytes - plan.blob_bytes).c_str(), Progress::human(usable).c_str(),
               opt.booster.c_str(), hw.device_name.c_str());
  if (plan.boosters.present())
    std::fprintf(stderr, "boosters: %d x %s, %s%s\n", plan.boosters.count, opt.booster.c_str(), plan.boosters.arrangement.c_str(),
                 plan.boosters.arrangement == kSplit
                     ? fmt::format(" (each holds {} of {} experts per layer: residency {})", plan.chemistry.experts / plan.boosters.count,
                                   plan.chemistry.experts, Progress::human(residency)).c_str()
                     : "");
  if (residency > usable)
    fail("build: plan residency {} bytes exceeds the {} booster's usable memory {} bytes (free {} - reserve {} - "
         "floor {}) by {} bytes", residency, opt.booster, usable, hw.memory_free, hw.reserve, hw.floor,
         residency - usable);

  StagedDir dir(opt.out, opt.force);
  write_text(dir.path() / "plan.json", plan.to_json().dump(1) + "\n");
  if (fuel) condition_weights(*fuel, plan, (dir.path() / "weights.blob").string());
  write_text(dir.path() / "engine.h", generate_engine_header(plan));
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "config.json",
                        "preprocessor_config.json"})
    if (fs::exists(fs::path(opt.fuel_dir) / f)) fs::copy_file(fs::path(opt.fuel_dir) / f, dir.path() / f);

  fs::create_directories(dir.path() / "bin");
  // The binary is compiled in place under the staged directory, then the whole directory is
  // renamed; the engine locates its plan relative to its own path, not an absolute one.
  const std::string exe = (dir.path() / "bin/rocket-engine").string();
  const std::string cmd = opt.booster == "host" ? host_engine_compile_command(dir.path().string(), exe)
                                                : h200_engine_compile_command(dir.path().string(), exe);
  std::fprintf(stderr, "compiling the %s engine for chemistry %s ...\n", opt.booster.c_str(), plan.fingerprint.c_str());
  const auto c0 = Clock::now();
  if (std::system(("bash -c " + shell_quote(cmd)).c_str()) != 0) fail("build: compiling the engine failed; command was:\n{}", cmd);
  std::fprintf(stderr, "engine compiled in %.1f s\n", std::chrono::duration<double>(Clock::now() - c0).count());
  fs::remove_all(dir.path() / "obj");
  dir.commit();
  std::fprintf(stderr, "built %s in %.1f s\n", opt.out.c_str(), std::chrono::duration<double>(Clock::now() - t0).count());
}

}  // namespace rocket
