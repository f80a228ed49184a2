#include "kernels/host/sample.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rocket::host {
namespace {

uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// First chunk of the sorted order tried when looking for the top_p cut. Peaked distributions reach
// top_p within a handful of tokens, so one small chunk usually suffices.
constexpr int kTopPFirstChunk = 64;

}  // namespace

int32_t argmax(const float* logits, int n) {
  CHECK(n >= 1, "argmax of an empty row");
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

double counter_uniform(uint64_t seed, uint64_t counter) {
  // The inner hash decorrelates neighbouring seeds; adding the counter keeps the map from counters
  // to draws a bijection for a fixed seed.
  const uint64_t z = splitmix64(splitmix64(seed) + counter);
  return double(z >> 11) * 0x1.0p-53;
}

void adjust_logits(const float* logits, int n, const SamplingKnobs& knobs, const SamplingHistory& history, float* out) {
  std::copy(logits, logits + n, out);
  if (!knobs.adjusts()) return;
  for (int b = 0; b < knobs.logit_bias; ++b) {
    const LogitBias& e = history.bias[b];
    CHECK(e.token >= 0 && e.token < n, "logit bias for a token outside the row");
    out[e.token] += e.bias;
  }
  const float rep = knobs.repetition_penalty, freq = knobs.frequency_penalty, presence = knobs.presence_penalty;
  for (int i = 0; i < n; ++i) {
    const int32_t c = history.counts[i];
    const bool in_prompt = (history.prompt[i / 32] >> (i % 32)) & 1u;
    float x = out[i];
    if (rep != 1.0f && (c > 0 || in_prompt)) x = x > 0.0f ? x / rep : x * rep;
    // NOTE: product and difference each rounded, as the device sampler's __fmul_rn then __fsub_rn; a
    // fused multiply-add would round once (the build targets baseline x86-64, which has none).
    x -= freq * float(c);
    if (c > 0) x -= presence;
    out[i] = x;
  }
}

int32_t sample(const float* logits, int n, const SamplingKnobs& knobs, float* scratch, int32_t* scratch_idx,
               const SamplingHistory& history) {
  CHECK(n >= 1, "sample from an empty row");
  if (!knobs.adjusts()) return select_token(logits, n, knobs, scratch, scratch_idx);
  adjust_logits(logits, n, knobs, history, scratch);
  return select_token(scratch, n, knobs, scratch, scratch_idx);
}

int32_t select_token(const float* logits, int n, const SamplingKnobs& knobs, float* scratch, int32_t* scratch_idx) {
  CHECK(n >= 1, "sample from an empty row");
  if (knobs.temperature <= 0.0f) return argmax(logits, n);
  float* p = scratch;
  int32_t* idx = scratch_idx;
  for (int i = 0; i < n; ++i) {
    p[i] = logits[i] / knobs.temperature;  // division as HF's TemperatureLogitsWarper does
    idx[i] = i;
  }
  // Strict total order: larger value first, lower index on ties, so every selection below is
  // deterministic and unique.
  const auto before = [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };

  int kept = n;
  if (knobs.top_k > 0 && knobs.top_k < n) {
    kept = knobs.top_k;
    std::nth_element(idx, idx + kept, idx + n, before);
  }
  float mx = -INFINITY;
  for (int i = 0; i < kept; ++i) mx = std::max(mx, p[idx[i]]);
  double total = 0.0;
  for (int i = 0; i < kept; ++i) {
    float e = std::exp(p[idx[i]] - mx);
    // min_p: e is the token's probability over the largest one's. Zeroing keeps `before` an order
    // (ties at 0 to the lower index) and takes the token out of every mass below.
    if (e < knobs.min_p) e = 0.0f;
    p[idx[i]] = e;  // monotone in the scaled logit, so `before` keeps its order
    total += e;
  }

  // The draw walks the kept tokens in a defined order: by probability when top-k truncated them (the
  // order nth_element leaves is unspecified; the device sampler walks by probability too), else by
  // index (the top-p branch below sorts its prefix itself).
  if (kept < n && knobs.top_p >= 1.0f) std::sort(idx, idx + kept, before);
  int prefix = kept;
  if (knobs.top_p < 1.0f) {
    // Sort the distribution lazily, a growing chunk at a time: nth_element moves the next-best chunk
    // to the front of the unsorted tail, then only that chunk is sorted. Cost is O(kept) plus
    // O(prefix log prefix), not a full sort of the vocabulary.
    const double need = double(knobs.top_p) * total;
    double cum = 0.0;
    int sorted = 0;
    for (int m = std::min(kept, kTopPFirstChunk);; m = std::min(kept, m * 4)) {
      if (m < kept) std::nth_element(idx + sorted, idx + m, idx + kept, before);
      std::sort(idx + sorted, idx + m, before);
      for (int i = sorted; i < m; ++i) {
        cum += p[idx[i]];
        if (cum >= need) { prefix = i + 1; break; }
      }
      if (prefix < kept || m == kept) break;  // found the cut, or rounding left all short of `need`
      sorted = m;
    }
  }

  double mass = 0.0;
  for (int i = 0; i < prefix; ++i) mass += p[idx[i]];
  const double u = counter_uniform(knobs.seed, knobs.counter) * mass;
  double cum = 0.0;
  int32_t last = idx[0];
  for (int i = 0; i < prefix; ++i) {
    const float pi = p[idx[i]];
    if (pi <= 0.0f) continue;
    cum += pi;
    last = idx[i];
    if (u < cum) return idx[i];
  }
  return last;  // u rounded up to the full mass
}

}  // namespace rocket::host

