// The flags of `generate`, declared once: the host engine's `rocket-engine generate` parses them, and
// `rocket generate` checks them before it hands the command line to the engine.
#pragma once

#include <cstdint>
#include <string>

#include "core/cli.h"

namespace rocket {

struct GenerateOptions {
  std::string prompt;
  int max_tokens = 64;
  float temperature = 0;  // 0: greedy
  float top_p = 1;
  int top_k = 0;          // 0: all
  uint64_t seed = 0;
};

// Declares --prompt (required), --max-tokens, --temperature, --top-p, --top-k and --seed on `cmd`.
void add_generate_options(CLI::App& cmd, GenerateOptions& o);

}  // namespace rocket
