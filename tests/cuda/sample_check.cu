// GPU check + benchmark for token selection (src/kernels/cuda/sample.cuh): greedy argmax and seeded
// temperature / min_p / top-k / top-p sampling, with and without the adjust phase (logit_bias,
// presence / frequency / repetition penalties read from a sampling history whose counts the kernel
// updates), for a3b (vocab 248320) and tiny (151936) at buckets 1, 8, 32.
// Rows mix every knob combination on two shapes of logits: "flat" (normal bulk with planted ties: a tied
// maximum and a block of equal values, so the cuts' candidates overflow and the sampler takes its radix
// search) and "llm" (a peaked head of a few hundred tokens over a low bulk, the shape a model's logits
// have, so the cuts stay within the candidate buffer); the token buffer is poisoned. Every token is
// compared with host::argmax / host::sample on the same logits, params and counter, over several
// counters per row; the rows with a history keep a host twin of it, counted with each draw, and the
// device's counts must equal it afterwards. Times the greedy kernel and the sampler for each knob set
// (penalties included) against a device copy measured in the same run. Then the same rows under
// grammar masks (structured outputs) read from mapped pinned host memory as the engine stages them:
// unmasked rows beside rows allowed half the vocabulary, seven tokens, or one, compared with the host's
// adjust, grammar::mask_logits, select; and the masked sampler timed. Exit 1 on a mismatch.
//
// Tolerance: none. The device draws with the host's generator on the host's probabilities; a draw may
// legitimately differ only when u · mass lies within 2^-28 of the mass from a cumulative boundary
// (sample.cuh), which a random draw hits with probability ~1e-8, so agreement must be exact here.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "check_support.h"
#include "grammar/token_mask.h"
#include "kernels/cuda/sample.cuh"
#include "kernels/host/sample.h"

using namespace rocket;
using check::DeviceBuffer;

namespace {

std::vector<float> flat_logits(int rows, int vocab, std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 2.5f);
  std::vector<float> l(size_t(rows) * vocab);
  for (auto& x : l) x = n(rng);
  for (int i = 0; i < rows; ++i) {
    float* r = l.data() + size_t(i) * vocab;
    const int a = int(rng() % uint32_t(vocab)), b = int(rng() % uint32_t(vocab));
    r[a] = r[b] = 16.0f + i % 3;  // tied maximum: greedy takes the lower index
    const int c = int(rng() % uint32_t(vocab - 4096));
    for (int j = 0; j < 4096; j += 3) r[c + j] = 9.0f;  // a block of equal values for the cuts' ties
  }
  return l;
}

// A model's shape: a bulk well below a head whose logits fall off from the top, with a few exact ties
// in the head (duplicates of a head value at other indices).
std::vector<float> llm_logits(int rows, int vocab, std::mt19937& rng) {
  std::normal_distribution<float> bulk(-2.0f, 2.0f), jitter(0.0f, 0.4f);
  std::vector<float> l(size_t(rows) * vocab);
  for (auto& x : l) x = bulk(rng);
  for (int i = 0; i < rows; ++i) {
    float* r = l.data() + size_t(i) * vocab;
    const float top = 20.0f + float(i % 5);
    for (int h = 0; h < 300; ++h) r[rng() % uint32_t(vocab)] = top - 0.08f * float(h) + jitter(rng);
    const float tied = r[rng() % uint32_t(vocab)] = top - 1.5f;
    for (int t = 0; t < 3; ++t) r[rng() % uint32_t(vocab)] = tied;
  }
  return l;
}

// Knob mix by row: greedy, plain temperature, top-k only, top-p only, both, tiny top-p (one token),
// top-k 1, a large top-k, the recommended knobs of Qwen3.5, top-k at and beyond the candidate buffer;
// then the adjust phase: penalties and bias sampled, greedy over adjusted logits, min_p with top-k and
// a negative frequency penalty, and min_p alone (no history). history = 0 marks the rows that get one.
SamplingKnobs knobs_for(int i, std::mt19937& rng) {
  SamplingKnobs k;
  k.seed = (uint64_t(rng()) << 32) | rng();
  k.counter = rng() % 4096;
  switch (i % 16) {
    case 0: k.temperature = 0.0f; break;
    case 1: k.temperature = 0.7f; break;
    case 2: k.temperature = 1.0f, k.top_k = 40; break;
    case 3: k.temperature = 0.9f, k.top_p = 0.9f; break;
    case 4: k.temperature = 1.3f, k.top_k = 200, k.top_p = 0.8f; break;
    case 5: k.temperature = 0.6f, k.top_p = 0.05f; break;
    case 6: k.temperature = 2.0f, k.top_k = 1; break;
    case 7: k.temperature = 1.1f, k.top_k = 5000, k.top_p = 0.97f; break;
    case 8: k.temperature = 0.7f, k.top_k = 20, k.top_p = 0.8f; break;
    case 9: k.temperature = 1.0f, k.top_k = 4096; break;  // the candidate buffer's size exactly
    case 10: k.temperature = 1.0f, k.top_k = 4097; break;
    case 11: k.temperature = 0.6f, k.top_p = 0.95f; break;
    case 12:
      k.temperature = 0.8f, k.presence_penalty = 0.5f, k.frequency_penalty = 0.3f, k.repetition_penalty = 1.2f;
      k.history = 0;
      break;
    case 13: k.temperature = 0.0f, k.repetition_penalty = 1.5f, k.history = 0; break;
    case 14: k.temperature = 1.0f, k.min_p = 0.05f, k.top_k = 50, k.frequency_penalty = -0.5f, k.history = 0; break;
    case 15: k.temperature = 0.7f, k.min_p = 0.1f, k.top_p = 0.9f; break;
  }
  return k;
}

// Sampling histories for B slots (core/sampling_history.h), on the host and on the device.
struct Histories {
  int vocab, words;
  std::vector<int32_t> counts;
  std::vector<uint32_t> prompt;
  std::vector<LogitBias> bias;
  DeviceBuffer<int32_t> d_counts;
  DeviceBuffer<uint32_t> d_prompt;
  DeviceBuffer<LogitBias> d_bias;

  // Slot i's history from row i's logits: some of its 100 most likely tokens drawn before (1..3 times)
  // or in the prompt, others at random, and 40 biases in [-8, 8] on random tokens plus -100 on the top.
  Histories(const std::vector<float>& logits, int rows, int v, std::mt19937& rng)
      : vocab(v), words(history_prompt_words(v)), counts(size_t(rows) * v, 0), prompt(size_t(rows) * words, 0u),
        bias(size_t(rows) * kMaxLogitBias), d_counts(counts.size()), d_prompt(prompt.size()), d_bias(bias.size()) {
    std::uniform_real_distribution<float> b(-8.0f, 8.0f);
    for (int i = 0; i < rows; ++i) {
      const float* r = logits.data() + size_t(i) * v;
      std::vector<int32_t> idx(static_cast<size_t>(v));
      std::iota(idx.begin(), idx.end(), 0);
      std::partial_sort(idx.begin(), idx.begin() + 100, idx.end(), [r](int32_t a, int32_t c) { return r[a] > r[c]; });
      for (int h = 1; h < 100; ++h) {
        const int32_t t = idx[size_t(h)];
        if (h % 3 == 0) counts[size_t(i) * v + t] = 1 + int32_t(rng() % 3);
        if (h % 4 == 1) prompt[size_t(i) * words + t / 32] |= 1u << (t % 32);
      }
      for (int n = 0; n < 200; ++n) counts[size_t(i) * v + rng() % uint32_t(v)] += 1;
      std::vector<int32_t> tokens = {idx[0]};
      while (tokens.size() < 41) {
        const int32_t t = int32_t(rng() % uint32_t(v));
        if (std::find(tokens.begin(), tokens.end(), t) == tokens.end()) tokens.push_back(t);
      }
      for (size_t e = 0; e < tokens.size(); ++e)
        bias[size_t(i) * kMaxLogitBias + e] = LogitBias{.token = tokens[e], .bias = e == 0 ? -100.0f : b(rng)};
    }
    d_counts.upload(counts);
    d_prompt.upload(prompt);
    d_bias.upload(bias);
  }
  SamplingHistory of(int slot) const {
    return {.counts = counts.data() + size_t(slot) * vocab, .prompt = prompt.data() + size_t(slot) * words,
            .bias = bias.data() + size_t(slot) * kMaxLogitBias};
  }
};

template <int kVocab, int B>
bool run(const char* name, bool llm, double copy, std::mt19937& rng) {
  const std::vector<float> logits = llm ? llm_logits(B, kVocab, rng) : flat_logits(B, kVocab, rng);
  std::vector<SamplingKnobs> knobs(B);
  for (int i = 0; i < B; ++i) knobs[i] = knobs_for(i + B, rng);
  if (B == 1) knobs[0] = knobs_for(8 + 4 * int(llm), rng);  // a cut on each shape (rows with B + i)
  Histories hist(logits, B, kVocab, rng);
  for (int i = 0; i < B; ++i)
    if (knobs[i].history == 0) knobs[i].history = i, knobs[i].logit_bias = 41;
  DeviceBuffer<float> dl(logits);
  DeviceBuffer<SamplingKnobs> dk(knobs);
  DeviceBuffer<int32_t> dt(B);
  rocket::cuda::SampleParams p{.logits = dl.ptr,
                               .knobs = dk.ptr,
                               .tokens = dt.ptr,
                               .counts = hist.d_counts.ptr,
                               .prompt = hist.d_prompt.ptr,
                               .bias = hist.d_bias.ptr};
  std::vector<float> scratch(kVocab);
  std::vector<int32_t> scratch_idx(kVocab);
  bool ok = true;
  int compared = 0;
  for (int draw = 0; draw < 8; ++draw) {
    for (auto& k : knobs) k.counter += 1;
    dk.upload(knobs);
    CUDA_CHECK(cudaMemset(dt.ptr, 0xff, B * 4));
    rocket::cuda::sample<B, kVocab>(p, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<int32_t> got = dt.download();
    for (int i = 0; i < B; ++i) {
      const SamplingHistory h = knobs[i].history >= 0 ? hist.of(knobs[i].history) : SamplingHistory{};
      const int32_t want =
          host::sample(logits.data() + size_t(i) * kVocab, kVocab, knobs[i], scratch.data(), scratch_idx.data(), h);
      if (knobs[i].adjusts()) hist.counts[size_t(knobs[i].history) * kVocab + want] += 1;  // as the kernel counts
      ++compared;
      if (got[i] != want && ok) {
        ok = false;
        std::printf("  first mismatch row %d draw %d (T %.2f top_k %d top_p %.2f min_p %.2f penalties %.2f %.2f %.2f "
                    "counter %llu): gpu %d host %d\n",
                    i, draw, knobs[i].temperature, knobs[i].top_k, knobs[i].top_p, knobs[i].min_p,
                    knobs[i].presence_penalty, knobs[i].frequency_penalty, knobs[i].repetition_penalty,
                    (unsigned long long)knobs[i].counter, got[i], want);
      }
    }
  }
  if (hist.d_counts.download() != hist.counts && ok) {
    ok = false;
    std::printf("  the device's history counts differ from the host's after the draws\n");
  }
  // The rows under grammar masks, in mapped pinned memory as H200Engine::mask_next_picks writes them.
  // Row i % 4: none (masked = 0), half the vocabulary at random, seven tokens (three of the row's head,
  // four at random), one token at random.
  constexpr int kWords = rocket::cuda::mask_words(kVocab);
  uint32_t* masks = nullptr;
  CUDA_CHECK(cudaHostAlloc(&masks, sizeof(uint32_t) * B * kWords, cudaHostAllocMapped));
  for (int i = 0; i < B; ++i) {
    uint32_t* m = masks + size_t(i) * kWords;
    const float* r = logits.data() + size_t(i) * kVocab;
    std::fill_n(m, kWords, 0u);
    const auto allow = [&](int32_t t) { m[t / 32] |= 1u << (t % 32); };
    if (i % 4 == 0) std::fill_n(m, kWords, ~0u);
    if (i % 4 == 1)
      for (int w = 0; w < kWords; ++w) m[w] = uint32_t(rng());
    if (i % 4 == 2) {
      std::vector<int32_t> idx(static_cast<size_t>(kVocab));
      std::iota(idx.begin(), idx.end(), 0);
      std::partial_sort(idx.begin(), idx.begin() + 8, idx.end(), [r](int32_t a, int32_t c) { return r[a] > r[c]; });
      for (int h = 5; h < 8; ++h) allow(idx[size_t(h)]);
      for (int t = 0; t < 4; ++t) allow(int32_t(rng() % uint32_t(kVocab)));
    }
    if (i % 4 == 3) allow(int32_t(rng() % uint32_t(kVocab)));
    knobs[i].masked = i % 4 != 0;
  }
  p.mask = masks;
  int masked_compared = 0;
  for (int draw = 0; draw < 4; ++draw) {
    for (auto& k : knobs) k.counter += 1;
    dk.upload(knobs);
    CUDA_CHECK(cudaMemset(dt.ptr, 0xff, B * 4));
    rocket::cuda::sample<B, kVocab>(p, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<int32_t> got = dt.download();
    for (int i = 0; i < B; ++i) {
      const SamplingHistory h = knobs[i].history >= 0 ? hist.of(knobs[i].history) : SamplingHistory{};
      const float* r = logits.data() + size_t(i) * kVocab;
      int32_t want;
      if (!knobs[i].masked) {
        want = host::sample(r, kVocab, knobs[i], scratch.data(), scratch_idx.data(), h);
      } else {  // HostBatchEngine::pick's masked path
        if (knobs[i].adjusts()) host::adjust_logits(r, kVocab, knobs[i], h, scratch.data());
        else std::copy_n(r, kVocab, scratch.data());
        grammar::mask_logits(masks + size_t(i) * kWords, scratch.data(), kVocab);
        want = host::select_token(scratch.data(), kVocab, knobs[i], scratch.data(), scratch_idx.data());
      }
      if (knobs[i].adjusts()) hist.counts[size_t(knobs[i].history) * kVocab + want] += 1;
      ++masked_compared;
      if (got[i] != want && ok) {
        ok = false;
        std::printf("  first masked mismatch row %d (mask kind %d) draw %d (T %.2f top_k %d top_p %.2f): gpu %d host %d\n", i,
                    i % 4, draw, knobs[i].temperature, knobs[i].top_k, knobs[i].top_p, got[i], want);
      }
    }
  }
  if (hist.d_counts.download() != hist.counts && ok) {
    ok = false;
    std::printf("  the device's history counts differ from the host's after the masked draws\n");
  }
  for (auto& k : knobs) k.masked = 0;

  // Greedy kernel on the same rows.
  CUDA_CHECK(cudaMemset(dt.ptr, 0xff, B * 4));
  rocket::cuda::argmax<B, kVocab>(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<int32_t> greedy = dt.download();
  for (int i = 0; i < B; ++i)
    if (greedy[i] != host::argmax(logits.data() + size_t(i) * kVocab, kVocab) && ok) {
      ok = false;
      std::printf("  argmax mismatch row %d: gpu %d host %d\n", i, greedy[i], host::argmax(logits.data() + size_t(i) * kVocab, kVocab));
    }
  const double bytes = double(B) * kVocab * 4;
  char what[128];
  std::snprintf(what, sizeof what, "argmax %s", name);
  check::report(what, B, check::time_us([&] { rocket::cuda::argmax<B, kVocab>(p, nullptr); }), bytes, copy, 0.0, ok);
  // Each knob set on every row: plain temperature, Qwen3.5's recommended cut, top-p alone, the cut
  // whose candidates overflow (top-k beyond the buffer), and Qwen3.5's cut with a presence penalty and
  // the rows' biases (the adjust phase's cost).
  struct Timed {
    const char* what;
    float temperature, top_p;
    int32_t top_k;
    float presence;
  };
  for (const Timed t : {Timed{"T0.7", 0.7f, 1.0f, 0, 0.0f}, Timed{"T0.7 k20 p0.8", 0.7f, 0.8f, 20, 0.0f},
                        Timed{"T1 p0.95", 1.0f, 0.95f, 0, 0.0f}, Timed{"T1 k5000 p0.9", 1.0f, 0.9f, 5000, 0.0f},
                        Timed{"T0.7 k20 p0.8 presence1.5 bias", 0.7f, 0.8f, 20, 1.5f}}) {
    for (int i = 0; i < B; ++i) {
      SamplingKnobs& k = knobs[i];
      k.temperature = t.temperature, k.top_k = t.top_k, k.top_p = t.top_p, k.min_p = 0.0f;
      k.presence_penalty = t.presence, k.frequency_penalty = 0.0f, k.repetition_penalty = 1.0f;
      k.history = t.presence != 0.0f ? i : -1, k.logit_bias = t.presence != 0.0f ? 41 : 0;
    }
    dk.upload(knobs);
    std::snprintf(what, sizeof what, "sample %s %s %s", llm ? "llm" : "flat", t.what, name);
    check::report(what, B, check::time_us([&] { rocket::cuda::sample<B, kVocab>(p, nullptr); }, 50), bytes, copy, 0.0, ok);
    // The same with every row masked (half the vocabulary allowed), the masks read over PCIe.
    for (int i = 0; i < B; ++i) {
      knobs[i].masked = 1;
      for (int w = 0; w < kWords; ++w) masks[size_t(i) * kWords + w] = uint32_t(rng()) | 1u;
    }
    dk.upload(knobs);
    std::snprintf(what, sizeof what, "sample %s %s masked %s", llm ? "llm" : "flat", t.what, name);
    check::report(what, B, check::time_us([&] { rocket::cuda::sample<B, kVocab>(p, nullptr); }, 50), bytes, copy, 0.0, ok);
    for (auto& k : knobs) k.masked = 0;
  }
  CUDA_CHECK(cudaFreeHost(masks));
  std::printf("  %d draws compared with the host sampler, %d under grammar masks\n", compared, masked_compared);
  return ok;
}

}  // namespace

int main() {
  try {
    const double copy = check::device_copy_gbps();
    std::printf("device copy (read+write): %.0f GB/s; %% column = achieved / copy\n", copy);
    std::mt19937 rng(17);
    bool ok = true;
    for (const bool llm : {true, false}) {
      ok &= run<248320, 1>("a3b", llm, copy, rng);
      ok &= run<248320, 8>("a3b", llm, copy, rng);
      ok &= run<248320, 32>("a3b", llm, copy, rng);
      ok &= run<151936, 8>("tiny", llm, copy, rng);
      ok &= run<151936, 32>("tiny", llm, copy, rng);
    }
    std::printf("sample check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "sample_check: %s\n", e.what());
    return 1;
  }
}
