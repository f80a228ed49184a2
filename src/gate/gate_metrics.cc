#include "gate/gate_metrics.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace rocket {

void GateMetrics::add_row(std::span<const float> ref, std::span<const float> cand, int32_t target) {
  CHECK(ref.size() == cand.size() && !ref.empty(), "gate: rows of different vocabularies");
  double kl = 0;
  size_t best_ref = 0, best_cand = 0;
  for (size_t v = 0; v < ref.size(); ++v) {
    const double p = std::exp(double(ref[v]));
    // A token the reference gives no mass adds nothing, whatever the candidate says (0 · log 0 = 0).
    if (p > 0) kl += p * (double(ref[v]) - double(cand[v]));
    if (ref[v] > ref[best_ref]) best_ref = v;
    if (cand[v] > cand[best_cand]) best_cand = v;
  }
  kl_.push_back(std::max(0.0, kl));  // rounding can leave a hair below zero for equal rows
  top1_same_ += best_ref == best_cand;
  if (target >= 0) {
    CHECK(size_t(target) < ref.size(), "gate: target outside the vocabulary");
    nll_ref_ -= ref[size_t(target)];
    nll_cand_ -= cand[size_t(target)];
    ++targets_;
  }
}

void GateMetrics::add_greedy(std::span<const int32_t> ref, std::span<const int32_t> cand) {
  CHECK(ref.size() == cand.size() && !ref.empty(), "gate: greedy continuations of different lengths");
  size_t same = 0;
  while (same < ref.size() && ref[same] == cand[same]) ++same;
  ++greedy_prompts_;
  greedy_tokens_ = int(ref.size());
  greedy_whole_ += same == ref.size();
  greedy_fraction_sum_ += double(same) / double(ref.size());
}

GateFigures GateMetrics::figures() const {
  GateFigures f;
  f.positions = int64_t(kl_.size());
  if (!kl_.empty()) {
    std::vector<double> sorted = kl_;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double k : sorted) sum += k;
    f.kl_mean = sum / double(sorted.size());
    f.kl_p99 = sorted[std::min(sorted.size() - 1, size_t(std::ceil(0.99 * double(sorted.size()))) - 1)];
    f.kl_max = sorted.back();
    f.top1_agreement = double(top1_same_) / double(kl_.size());
  }
  if (targets_) {
    f.perplexity_reference = std::exp(nll_ref_ / double(targets_));
    f.perplexity_candidate = std::exp(nll_cand_ / double(targets_));
  }
  f.greedy_prompts = greedy_prompts_;
  f.greedy_tokens = greedy_tokens_;
  f.greedy_whole = greedy_whole_;
  f.greedy_agreement = greedy_prompts_ ? greedy_fraction_sum_ / greedy_prompts_ : 0;
  return f;
}

nlohmann::json GateFigures::to_json() const {
  return {{"positions", positions},
          {"kl_mean", kl_mean},
          {"kl_p99", kl_p99},
          {"kl_max", kl_max},
          {"top1_agreement", top1_agreement},
          {"perplexity_reference", perplexity_reference},
          {"perplexity_candidate", perplexity_candidate},
          {"greedy_prompts", greedy_prompts},
          {"greedy_tokens", greedy_tokens},
          {"greedy_whole", greedy_whole},
          {"greedy_agreement", greedy_agreement}};
}

nlohmann::json GateThresholds::to_json() const {
  return {{"max_kl_mean", max_kl_mean}, {"max_kl_p99", max_kl_p99}, {"min_top1", min_top1}, {"min_greedy", min_greedy}};
}

std::vector<std::string> gate_violations(const GateFigures& f, const GateThresholds& t) {
  std::vector<std::string> out;
  if (t.max_kl_mean >= 0 && !(f.kl_mean <= t.max_kl_mean))
    out.push_back(fmt::format("KL mean {:.4g} > {:.4g}", f.kl_mean, t.max_kl_mean));
  if (t.max_kl_p99 >= 0 && !(f.kl_p99 <= t.max_kl_p99))
    out.push_back(fmt::format("KL p99 {:.4g} > {:.4g}", f.kl_p99, t.max_kl_p99));
  if (t.min_top1 >= 0 && !(f.top1_agreement >= t.min_top1))
    out.push_back(fmt::format("top-1 agreement {:.4f} < {:.4f}", f.top1_agreement, t.min_top1));
  if (t.min_greedy >= 0 && !(f.greedy_agreement >= t.min_greedy))
    out.push_back(fmt::format("greedy agreement {:.4f} < {:.4f}", f.greedy_agreement, t.min_greedy));
  return out;
}

}  // namespace rocket
