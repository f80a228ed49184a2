#include "kernels/host/moe.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/host/activations.h"

namespace rocket::host {

void router_top_k(const float* logits, int E, int k, int* idx, float* weight) {
  CHECK(k >= 1 && k <= E, "router top-k needs 1 <= k <= E");
  float mx = -INFINITY;
  for (int e = 0; e < E; ++e) mx = std::max(mx, logits[e]);
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) sum += std::exp(logits[e] - mx);
  const float inv = 1.0f / sum;
  // Insertion into a sorted list of k: k is small (<= 10) and E a few hundred, so this beats a sort
  // and needs no scratch. Strict > keeps the earlier (lower) index ahead on equal probabilities.
  int filled = 0;
  for (int e = 0; e < E; ++e) {
    const float p = std::exp(logits[e] - mx) * inv;
    if (filled == k && !(p > weight[k - 1])) continue;
    int pos = filled < k ? filled++ : k - 1;
    while (pos > 0 && p > weight[pos - 1]) {
      weight[pos] = weight[pos - 1];
      idx[pos] = idx[pos - 1];
      --pos;
    }
    weight[pos] = p;
    idx[pos] = e;
  }
  float top = 0.0f;
  for (int i = 0; i < k; ++i) top += weight[i];
  for (int i = 0; i < k; ++i) weight[i] /= top;
}

void swiglu(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

}  // namespace rocket::host
