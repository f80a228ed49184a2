// `rocket-engine imagecheck`: prompts with images on an engine, over the scheduler's interface
// (BatchEngine), the same run for every engine binary (see image_check.cc for the checks).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scheduler/batch_engine.h"

namespace rocket {

struct ImageCheckOptions {
  // The HF reference's logits of prompts with images (tools/reference/prompt_image_golden.py); empty:
  // none; a missing file skips that check, saying so.
  std::string golden;
  // Largest logit gap over the largest reference logit: the golden's bound, and on an engine that is
  // not exact the bound of every comparison between two computations of the same rows by different
  // calls (a batch of 2 against 1, decode against prefill, other prefill pieces).
  double tolerance = 0;
  // Exact: those computations agree bit for bit (the host engine: FP32, each row its own sums whatever
  // the batch or piece). Not exact (BF16 on the H200: another tiling, another rounding): only the same
  // call repeated is bitwise.
  bool exact = true;
};

// Runs the checks on `e` (which it leaves with garbage in slots 0..4 and their pages, snapshot 0);
// prints one line per check. Returns the exit status: 0 when all hold.
int run_image_check(BatchEngine& e, const ImageCheckOptions& options);

// `rocket-engine imagecheck`'s flags, one table for every engine: --golden FILE, --tolerance X, whose
// default is options.tolerance as passed (`tolerance_help` says where it comes from). Returns the exit
// status when the command ends here (--help, a refused flag); otherwise fills `options`.
std::optional<int> parse_image_check_command(const std::vector<std::string>& args, ImageCheckOptions& options,
                                             const std::string& tolerance_help);

}  // namespace rocket
