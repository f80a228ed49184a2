// The split of one engine step by kernel group, measured on the running engine (the
// rocket_step_seconds histogram's `kind` label, and the split the benchmarks report). An engine measures
// one decode step in every N (`rocket-engine launch --step-sample N`): the host engine with a clock
// read between its kernel groups, the H200 engine with CUDA events between them in a separately
// captured timing graph. The kinds are a closed set, so the series count is fixed.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

namespace rocket {

enum class StepGroup : uint8_t {
  kNorm,       // embedding gather, RMSNorms and residual adds
  kGdn,        // conv1d + the recurrent delta-rule step of linear-attention layers
  kAttention,  // full attention over the paged KV (and the KV append)
  kDense,      // every projection but the router, the experts and the LM head
  kMoe,        // router, top-k, routed and shared experts
  kLmHead,
  kSampling,
  kAllToAll,   // split boosters: routed rows to their experts' booster and the results back
};
inline constexpr int kStepGroups = 8;
inline constexpr std::array<std::string_view, kStepGroups> kStepGroupNames = {
    "norm", "gdn", "attention", "dense", "moe", "lm_head", "sampling", "all_to_all"};
// Split arrangements up to this many boosters report their links (one H200 host has at most 8 GPUs).
inline constexpr int kMaxSplitBoosters = 8;
inline std::string_view step_group_name(StepGroup g) { return kStepGroupNames[size_t(g)]; }

// One measured step: seconds per kind, and the rows (bucket) it ran. A split engine also says the
// bytes each link between two of its boosters carried during the step, both exchanges of every MoE
// layer (boosters = 0 for an engine without exchanges: no all_to_all kind, no links).
struct StepSplit {
  int rows = 0;
  std::array<double, kStepGroups> seconds{};
  int boosters = 0;
  std::array<uint64_t, kMaxSplitBoosters * kMaxSplitBoosters> link_bytes{};  // [from * boosters + to]
  uint64_t& link(int from, int to) { return link_bytes[size_t(from * boosters + to)]; }
  uint64_t link(int from, int to) const { return link_bytes[size_t(from * boosters + to)]; }
  double& operator[](StepGroup k) { return seconds[size_t(k)]; }
  double operator[](StepGroup k) const { return seconds[size_t(k)]; }
};

// Where an engine hands its measured steps (on the thread that runs the step).
using StepObserver = std::function<void(const StepSplit&)>;

// Which steps are measured: every `every`-th one from the first (0: none).
class StepSampling {
 public:
  explicit StepSampling(int every = 0) : every_(every) {}
  bool take() { return every_ > 0 && counter_++ % uint64_t(every_) == 0; }

 private:
  int every_;
  uint64_t counter_ = 0;
};

// The host engine's clock between kernel groups: lap(k) charges the time since the previous lap (or
// start) to kind k. Inactive (start() not called for this step), lap() reads no clock.
class StepClock {
 public:
  void start(int rows) {
    split_ = StepSplit{.rows = rows};
    active_ = true;
    last_ = std::chrono::steady_clock::now();
  }
  void lap(StepGroup k) {
    if (!active_) return;
    const auto now = std::chrono::steady_clock::now();
    split_[k] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  bool active() const { return active_; }
  // A split engine's exchange: `bytes` from booster `from` to booster `to` (from != to).
  void exchanged(int boosters, int from, int to, uint64_t bytes) {
    if (!active_) return;
    split_.boosters = boosters;
    split_.link(from, to) += bytes;
  }
  // Ends the step: its split, and the clock inactive until the next start().
  const StepSplit& stop() {
    active_ = false;
    return split_;
  }

 private:
  bool active_ = false;
  std::chrono::steady_clock::time_point last_;
  StepSplit split_;
};

}  // namespace rocket
