// The flags of `profile`, declared once: the host engine's `rocket-engine profile` parses them, and
// `rocket profile` checks them before it hands the command line to the engine.
#pragma once

#include <string>

#include "core/cli.h"

namespace rocket {

struct ProfileOptions {
  std::string corpus;                    // engine/corpus.h says the format
  std::string out = "coactivation.json";
  int max_tokens = 0;                    // greedy tokens decoded after each entry's prompt (routed too)
};

// Declares --corpus (required), --out and --max-tokens on `cmd`.
void add_profile_options(CLI::App& cmd, ProfileOptions& o);

}  // namespace rocket
