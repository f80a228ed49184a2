// `rocket gate`: a candidate engine against a reference engine of the same fuel (the BF16 engine),
// on held-out text. Both engines' own binaries score the same token windows
// (`rocket-engine score`, engine/score.h) and stream their rows here through pipes; the figures
// (gate_metrics.h) are checked against the thresholds given, and the report says which, if any, the
// candidate breaks.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gate/gate_metrics.h"

namespace rocket {

struct GateOptions {
  std::string candidate, reference;  // engine directories
  std::string text;                  // held-out text, UTF-8
  int windows = 16;                  // scored windows, consecutive in the text
  int window_tokens = 256;
  int greedy_prompts = 16;           // the first tokens of the first windows, continued greedily
  int greedy_prompt_tokens = 32;
  int greedy_tokens = 32;
  GateThresholds thresholds;
};

struct GateReport {
  GateFigures figures;
  std::vector<std::string> violations;  // empty: passed
  nlohmann::json json;                  // everything, with the engines' formats and the options
};

// Error when the engines are not of one fuel (tokenizer or vocabulary differ), the text is too short
// for the windows asked, or an engine's scoring fails.
GateReport run_gate(const GateOptions& options);

}  // namespace rocket
