// The quality gate's figures: how far a candidate engine's next-token distributions lie from a
// reference engine's (the BF16 engine of the same fuel), row by row over the same token windows, and
// how long their greedy continuations of the same prompts agree.
//
//   KL(ref || cand) per position, in nats: mean, p99 and max over every scored position
//   top-1 agreement: the fraction of positions whose most likely token is the same
//   perplexity of each engine on the text's own next tokens
//   greedy: per prompt the tokens generated before the first difference; the mean fraction of the
//     continuation that agrees, and how many continuations agree whole
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rocket {

struct GateFigures {
  int64_t positions = 0;
  double kl_mean = 0, kl_p99 = 0, kl_max = 0;
  double top1_agreement = 0;
  double perplexity_reference = 0, perplexity_candidate = 0;
  int greedy_prompts = 0, greedy_tokens = 0, greedy_whole = 0;
  double greedy_agreement = 0;  // mean over prompts of (agreeing prefix / greedy_tokens)
  nlohmann::json to_json() const;
};

// Limits a candidate must keep to pass; a negative limit is not checked.
struct GateThresholds {
  double max_kl_mean = -1, max_kl_p99 = -1, min_top1 = -1, min_greedy = -1;
  nlohmann::json to_json() const;
};

// Each limit the figures break, in words ("KL p99 0.31 > 0.2"); empty: the candidate passes.
std::vector<std::string> gate_violations(const GateFigures& f, const GateThresholds& t);

class GateMetrics {
 public:
  // One position: both engines' log-probabilities over the vocabulary; `target` the text's next token
  // there, or -1 where the window ends.
  void add_row(std::span<const float> ref_logp, std::span<const float> cand_logp, int32_t target);
  // One prompt's greedy continuations (the same length).
  void add_greedy(std::span<const int32_t> ref, std::span<const int32_t> cand);
  GateFigures figures() const;

 private:
  std::vector<double> kl_;
  int64_t top1_same_ = 0;
  double nll_ref_ = 0, nll_cand_ = 0;
  int64_t targets_ = 0;
  int greedy_prompts_ = 0, greedy_tokens_ = 0, greedy_whole_ = 0;
  double greedy_fraction_sum_ = 0;
};

}  // namespace rocket
