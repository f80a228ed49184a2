// `rocket-engine speculate`: speculative decoding on this engine (a plan with draft_tokens) against
// plain greedy decoding of the same prompts (see speculate_check.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/host/host_engine.h"

namespace rocket {

struct SpeculateOptions {
  int prompts = 4;    // streams, each a distinct random prompt in its own slot, stepped in turn
  int tokens = 40;    // greedy tokens each
  int draft = 0;      // tokens per draft; 0: the plan's draft_tokens
  // < 0: the MTP layer drafts. Otherwise the drafts are the plain run's own tokens with this fraction
  // replaced by wrong ones, so every accepted length occurs whatever the weights (a random-weight
  // fuel's MTP layer rarely guesses right), and the acceptance is the one asked for.
  double oracle = -1;
  uint64_t seed = 1;
  // Non-empty: the prompts are windows of this text's tokens (held-out text, for an acceptance that
  // means something) instead of random tokens.
  std::vector<int32_t> text;
};

// Runs the check on `e` (leaving garbage in its slots); returns the exit status: 0 when every
// stream's tokens, and the logits of every row they were picked from, equal plain decoding's.
int cmd_speculate_check(HostEngine& e, const SpeculateOptions& o);

}  // namespace rocket
