#include "openai/logprobs.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rocket {

RowLogprobs row_logprobs(const float* logits, int vocab, int32_t token, int top) {
  CHECK(vocab >= 1 && token >= 0 && token < vocab, "row_logprobs: token outside the row");
  CHECK(top >= 0 && top <= vocab, "row_logprobs: more alternatives than the vocabulary");
  float mx = -INFINITY;
  for (int i = 0; i < vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(logits[i] - mx);
  const float log_z = mx + float(std::log(sum));

  // The `top` best so far, kept sorted: at most 20 are asked for, so an insertion into a short array
  // beats a heap, and most entries fail the first comparison against the current last.
  const auto before = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int> best;
  best.reserve(size_t(top) + 1);
  if (top > 0) {
    for (int i = 0; i < vocab; ++i) {
      if (int(best.size()) == top && !before(i, best.back())) continue;
      best.insert(std::upper_bound(best.begin(), best.end(), i, before), i);
      if (int(best.size()) > top) best.pop_back();
    }
  }
  RowLogprobs out;
  out.logprob = logits[token] - log_z;
  out.top.reserve(best.size());
  for (int i : best) out.top.push_back(TokenScore{i, logits[i] - log_z});
  return out;
}

}  // namespace rocket
