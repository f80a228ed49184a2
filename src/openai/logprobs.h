// Log-probabilities for the `logprobs` / `top_logprobs` request fields, from one row of logits.
//
// NOTE: they are the model's own distribution, log_softmax(logits), before temperature, top-k and
// top-p. OpenAI documents `logprob` as the token's log probability under the model; the processed
// distribution would be degenerate exactly where clients use logprobs most (temperature 0 makes every
// logprob 0 or -inf, top-k/top-p give -inf to most alternatives), and it would change with sampling
// knobs that do not change the model. vLLM's default (raw logprobs) makes the same choice.
//
// Computed in FP32 as the engine's logits are; the normaliser's 150k-term sum is accumulated in FP64
// so that its rounding does not grow with the vocabulary.
#pragma once

#include <cstdint>
#include <vector>

namespace rocket {

struct TokenScore {
  int32_t token;
  float logprob;
};

struct RowLogprobs {
  float logprob;                // of the chosen token
  std::vector<TokenScore> top;  // the `top` most likely tokens, most likely first, lower id on ties
};

// log_softmax(logits[0, vocab)) at `token`, and its `top` largest entries.
// REQUIRES: 0 <= token < vocab, 0 <= top <= vocab.
RowLogprobs row_logprobs(const float* logits, int vocab, int32_t token, int top);

}  // namespace rocket
