// `rocket build`: fuel + hardware profile -> engine directory
//   plan.json      the plan (chemistry, fingerprint, precision map, buckets, kernels, memory map)
//   weights.blob   conditioned weights at their plan offsets
//   engine.h       generated constexpr shapes, tiles and offsets
//   bin/rocket-engine   the engine built from engine.h (host: g++; h200: nvcc, linked statically)
//   tokenizer.json, tokenizer_config.json, generation_config.json, config.json, preprocessor_config.json
//                  copied from the fuel (where present)
#pragma once

#include <string>

#include "plan/plan.h"

namespace rocket {

struct BuildOptions {
  std::string fuel_dir;
  std::string booster = "host";
  std::string out;
  std::string profile;     // hardware profile JSON; default: probe this machine (host) / boosters/h200.json
  int max_context = 0;     // 0 = booster default
  int state_snapshots = 0; // 0 = two per stream slot
  int prefill_chunk = 0;   // tokens per prefill call; 0 = the booster's default (host 32, h200 2048)
  int max_streams = 0;     // the largest decode bucket, a power of two (buckets 1, 2, 4, ... it); 0: host 32,
                           // h200 the most its memory holds up to its kernels' 64 (at least 32)
  // The precision map (compiler/precision_map.h): "role=precision,..." for roles the fuel stores in
  // BF16 and the plan keeps in FP8 or NVFP4 (converted when conditioning); "" keeps the fuel's.
  std::string precision;
  // A `rocket gate --out` report that passed this map on this fuel (precision_map.h
  // admit_precision_map); recorded in the plan. "" builds the map ungated.
  std::string gate;
  // Speculative decoding (Plan::draft_tokens): the MTP layer proposes this many tokens per stream and
  // step; 0 does not draft. Needs a fuel with an MTP layer.
  int draft_tokens = 0;
  std::string golden;      // reference golden vectors (tools/reference/golden.py) for the static-fire token
  // The rocket's boosters (plan.boosters): how many, and replicated (an engine per booster) or split
  // (one engine over them, experts placed per booster).
  int boosters = 1;
  std::string arrangement = kReplicated;
  // A co-activation profile (fuel/coactivation.h, `rocket profile`): orders each layer's experts in
  // the blob and, split, places them on the boosters (compiler/placement.h). Empty: the identity
  // order and, split, the balanced default placement.
  std::string coactivation;
  bool force = false;
  // The split build for a GPU machine that cannot compile engines (no fmt or nlohmann headers there):
  // no_weights plans from the fuel's config.json alone (shapes from the chemistry's manifest) and
  // writes everything but weights.blob; weights_only re-derives the plan of the engine at `out` from
  // the full fuel, refuses unless it equals out/plan.json (fingerprint and memory map), and writes
  // out/weights.blob.
  bool no_weights = false;
  bool weights_only = false;
};

void build(const BuildOptions& opt);

// Empty when two plans lay out the same chemistry with the same memory map (fingerprint, blob and
// arena sizes, every tensor part and buffer at the same offset and size); otherwise the first difference.
std::string memory_map_difference(const Plan& a, const Plan& b);

}  // namespace rocket
