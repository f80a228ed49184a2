// A stream's sampling history: what the penalties and logit_bias of core/sampling_knobs.h read.
//
// Per stream slot: how often each token was drawn in this request's output so far (counts, int32 per
// vocabulary entry), which tokens the prompt holds (a bit per entry, for repetition_penalty), and the
// request's logit bias (up to kMaxLogitBias distinct tokens). The engine resets it when a request that
// adjusts its logits takes the slot (BatchEngine::reset_history) and the sampler increments the count
// of each token it draws for a row naming the slot. It needs no snapshot of its own: a request's
// output counts start at zero whatever prefix the cache resumes it from (a resumed prefix is prompt,
// marked from the prompt), and a fork of n choices is n streams with their own histories.
//
// The H200 engine keeps these arrays in the plan's arena (compiler/memory_map.cc sizes them), the
// host engine in memory of its own; the layout is the same.
#pragma once

#include <cstdint>

namespace rocket {

// OpenAI's limit on logit_bias entries per request.
constexpr int kMaxLogitBias = 300;

struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;  // added to the token's logit, in [-100, 100]
};
static_assert(sizeof(LogitBias) == 8);

// One slot's history, as the host sampler reads it. counts: [vocab]; prompt: [ceil(vocab / 32)] bits,
// token t at bit t % 32 of word t / 32; bias: [kMaxLogitBias], the first SamplingKnobs::logit_bias used.
struct SamplingHistory {
  const int32_t* counts = nullptr;
  const uint32_t* prompt = nullptr;
  const LogitBias* bias = nullptr;
};

constexpr int history_prompt_words(int vocab) { return (vocab + 31) / 32; }

}  // namespace rocket
