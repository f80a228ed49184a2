// `rocket build`: fuel + hardware profile -> engine directory
//   plan.json      the plan (chemistry, fingerprint, precision map, buckets, kernels, memory map)
//   weights.blob   conditioned weights at their plan offsets
//   engine.h       generated constexpr shapes, tiles and offsets
//   bin/rocket-engine   the engine built from engine.h (host booster)
//   tokenizer.json, tokenizer_config.json, generation_config.json, config.json   copied from the fuel
#pragma once

#include <string>

namespace rocket {

struct BuildOptions {
  std::string fuel_dir;
  std::string booster = "host";
  std::string out;
  std::string profile;     // hardware profile JSON; default: probe this machine (host) / boosters/h200.json
  int max_context = 0;     // 0 = booster default
  int state_snapshots = 0; // 0 = two per stream slot
  std::string golden;      // reference golden vectors (tools/reference/golden.py) for the static-fire token
  bool force = false;
};

void build(const BuildOptions& opt);

// The command that compiles an engine binary for the host booster from `engine_dir`/engine.h.
std::string host_engine_compile_command(const std::string& engine_dir, const std::string& output);

}  // namespace rocket
