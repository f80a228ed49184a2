// How the prefill benchmark measures (rocket-engine prefill-bench):
//   ms        wall time of one cold prompt: reset the slot, H200Engine::prefill in calls of the plan's
//             prefill_chunk with the first token picked on the device, until that token is on the host
//             (the server's time to first token less tokenizing and HTTP); the median of `reps`.
//             Distinct pseudo-random tokens per length.
//   split     the first call's piece again through H200Engine::bench_piece with one kernel kind
//             (StepKind) at a time, wall time each (they run on garbage activations: only the time
//             counts); "other" = the whole piece − the kinds' sum.
//   FLOPs     the tensor-core work of the piece: 2 · (every dense weight + the top-k routed experts'
//             and the shared expert's) per token, plus causal attention 4 · ctx · head_dim · heads per
//             token of a full-attention layer, and the LM head's row; the % is of the dense bf16 peak a
//             cuBLAS 8192³ GEMM reached in the same run.
// And how the check compares (rocket-engine prefill-check): the same tokens once through bucket-sized
// pieces (calls of 32 tokens, below the token path's minimum) and once through the token path, on two
// slots; the last row's logits, the recurrent and conv state each leaves, two decode steps after it
// (one decode call over both slots), a continuation over the cached prefix, and a snapshot taken inside
// a token-path piece against the state the bucket path holds at that boundary; then batched pieces,
// mixed steps, and one decode step of the largest bucket with every slot against each slot alone.
// Differences are relative to the largest magnitude of the reference (the bucket path, which parity
// checks).
#include "engine/h200/prefill_bench.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/h200/forward_shapes.h"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/cuda_handles.h"
#include "kernels/cuda/primitives/gemm.cuh"

namespace rocket {

using namespace h200;

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> prompt_of(int n, int seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t z = 0x9e3779b97f4a7c15ull * uint64_t(seed + 1);
  for (int i = 0; i < n; ++i) {
    z ^= z << 13, z ^= z >> 7, z ^= z << 17;
    ids[size_t(i)] = int32_t(z % uint64_t(kVocab));
  }
  return ids;
}

// One stream's prompt from position 0 (or pos0, continuing), through the engine's prefill as serving
// calls it; the first token picked. Returns seconds until it is on the host.
double prefill_prompt(H200Engine& e, int slot, const std::vector<int32_t>& ids, int64_t pos0) {
  const SamplingKnobs greedy{.temperature = 0.0f};
  const auto t0 = Clock::now();
  const int n = int(ids.size());
  for (int at = 0; at < n; at += int(kPrefillChunk)) {
    const int c = std::min(int(kPrefillChunk), n - at);
    const bool last = at + c == n;
    e.prefill(slot, ids.data() + at, c, pos0 + at, c, last ? &greedy : nullptr);
  }
  (void)e.tokens();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Tensor-core FLOPs of a piece of n tokens at positions pos0.. (see the file comment).
double piece_flops(int n, int64_t pos0) {
  const double H = kHidden, gdn = H * (kConvDim + kValueDim + 2.0 * kLinVHeads) + double(kValueDim) * H;
  const double attn = H * (2.0 * kQ + 2.0 * kKV) + double(kQ) * H;
  const double moe = H * kExperts + 3.0 * H * kSharedInter + H + 3.0 * H * kMoeInter * kTopK;
  const double per_token = 2.0 * (kLinearLayers * gdn + kFullLayers * attn + kLayers * moe);
  const double ctx = double(pos0) + (n + 1) / 2.0;
  return n * per_token + kFullLayers * 4.0 * n * ctx * kHeadDim * kHeads + 2.0 * H * kVocab;
}

}  // namespace

double measure_tensor_peak() {
  constexpr int N = 8192;
  const DeviceMemory a(uint64_t(N) * N * 2), b(uint64_t(N) * N * 2), c(uint64_t(N) * N * 2);
  CUDA_CHECK(cudaMemset(a.get(), 0x3c, a.bytes()));  // bf16 ~1.1: finite, nonzero
  CUDA_CHECK(cudaMemset(b.get(), 0x3c, b.bytes()));
  const Stream s;
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, s.get()));
  auto* A = static_cast<__nv_bfloat16*>(a.get());
  auto* B = static_cast<__nv_bfloat16*>(b.get());
  auto* C = static_cast<__nv_bfloat16*>(c.get());
  std::vector<double> t;
  for (int i = 0; i < 13; ++i) {
    const float ms = elapsed_ms(s.get(), [&] { cuda::gemm_rows(h, A, N, N, B, N, N, C, N); });
    if (i >= 3) t.push_back(ms);
  }
  cublasDestroy(h);
  return 2.0 * N * N * double(N) / (median(t) * 1e-3) / 1e12;
}

int run_prefill_bench(H200Engine& e, const std::vector<int>& lengths, int prefix, int continuation, int reps, double peak) {
  std::printf("dense bf16 tensor-core peak (cuBLAS 8192^3, median of 10): %.0f TFLOP/s\n", peak);
  std::printf("cold prefill, one stream, calls of %d tokens, first token picked on the device; median of %d\n\n",
              int(kPrefillChunk), reps);
  std::printf("| tokens | from | ms | prompt tok/s | TFLOP | %% of peak | piece split (ms): GDN | attention | MoE | dense | norm | LM head | other |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  auto row = [&](int n, int64_t pos0, int seed) {
    if (pos0 + n > kMaxContext) {
      std::printf("| %d | %lld | (past the plan's context %lld) |\n", n, (long long)pos0, (long long)kMaxContext);
      return;
    }
    const std::vector<int32_t> ids = prompt_of(n, seed);
    const std::vector<int32_t> prefix_ids = prompt_of(int(pos0), seed + 1000);
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      e.reset_slot(0);
      if (pos0) prefill_prompt(e, 0, prefix_ids, 0);
      t.push_back(prefill_prompt(e, 0, ids, pos0));
    }
    const double s = median(t);
    double flops = 0;
    for (int at = 0; at < n; at += int(kPrefillChunk)) flops += piece_flops(std::min(int(kPrefillChunk), n - at), pos0 + at);
    std::printf("| %d | %lld | %.1f | %.0f | %.2f | %.1f%% |", n, (long long)pos0, s * 1e3, n / s, flops / 1e12,
                100.0 * flops / s / 1e12 / peak);
    const int piece = std::min(n, int(kPrefillChunk));
    if (piece < H200Engine::kTokenPieceMin) {
      std::printf(" (bucket-sized pieces) | | | | | | |\n");
      return;
    }
    auto time_kinds = [&](uint32_t kinds) {
      std::vector<double> k;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        e.bench_piece(0, ids.data(), piece, pos0, kinds);
        k.push_back(std::chrono::duration<double>(Clock::now() - t0).count() * 1e3);
      }
      return median(k);
    };
    const double all = time_kinds(kKindAll);
    double sum = 0;
    for (uint32_t kind : {kKindGdn, kKindAttention, kKindMoe, kKindDense, kKindNorm, kKindLmHead}) {
      const double ms = time_kinds(kind);
      sum += ms;
      std::printf(" %.2f |", ms);
    }
    std::printf(" %.2f |\n", all - sum);
  };
  for (int n : lengths) row(n, 0, n);
  if (prefix > 0) row(continuation, prefix, 7);
  e.reset_slot(0);
  return 0;
}

int run_mixed_bench(H200Engine& e, int decode_rows, const std::vector<int>& lengths, int context, int reps) {
  CHECK(decode_rows >= 1 && decode_rows < kMaxStreams && context >= 1 && context < kMaxContext, "mixed bench: arguments");
  const SamplingKnobs greedy{.temperature = 0.0f};
  // The decoding streams: slots 0.. with `context` tokens each; the prompt on the next slot.
  const int prompt_slot = decode_rows;
  std::vector<int32_t> next(static_cast<size_t>(decode_rows));
  std::vector<int> slots(static_cast<size_t>(decode_rows));
  std::vector<int64_t> pos(size_t(decode_rows), context);
  std::vector<SamplingKnobs> knobs(size_t(decode_rows), greedy);
  for (int i = 0; i < decode_rows; ++i) {
    e.reset_slot(i);
    prefill_prompt(e, i, prompt_of(context, 300 + i), 0);
    next[size_t(i)] = e.tokens()[0];
    slots[size_t(i)] = i;
  }
  // Each timed step decodes at the same positions (rewriting one KV row): the context stays `context`.
  auto seconds = [&](auto&& step) {
    std::vector<double> t;
    for (int r = 0; r < reps + 1; ++r) {
      e.reset_slot(prompt_slot);
      const auto t0 = Clock::now();
      step();
      (void)e.tokens();
      if (r > 0) t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return median(t);
  };
  const double decode = seconds([&] { e.decode(decode_rows, next.data(), slots.data(), pos.data(), knobs.data()); });
  std::printf("%d streams decoding at %d tokens of context; a cold prompt piece of P tokens arrives; median of %d\n\n",
              decode_rows, context, reps);
  std::printf("decode step alone: %.2f ms\n\n", decode * 1e3);
  std::printf("| P | mixed step ms | x decode step | decode + separate piece ms | prompt tok/s while decoding (mixed) |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: |\n");
  for (int p : lengths) {
    if (p + kMaxBucket > kPrefillChunk || p > kMaxContext) {
      std::printf("| %d | (past the plan's prefill chunk %d less a bucket) |\n", p, int(kPrefillChunk));
      continue;
    }
    const std::vector<int32_t> ids = prompt_of(p, 400 + p);
    std::vector<PrefillSegment> segments;
    for (int i = 0; i < decode_rows; ++i)
      segments.push_back({.slot = i, .ids = &next[size_t(i)], .n = 1, .pos0 = context, .knobs = &knobs[size_t(i)]});
    segments.push_back({.slot = prompt_slot, .ids = ids.data(), .n = p, .pos0 = 0, .knobs = &greedy});
    const double mixed = seconds([&] { e.prefill_batch(segments, decode_rows); });
    const double separate = seconds([&] {
      e.decode(decode_rows, next.data(), slots.data(), pos.data(), knobs.data());
      (void)e.tokens();
      e.prefill(prompt_slot, ids.data(), p, 0, p, &greedy);
    });
    std::printf("| %d | %.2f | %.2f | %.2f | %.0f |\n", p, mixed * 1e3, mixed / decode, separate * 1e3, p / mixed);
  }
  for (int i = 0; i <= decode_rows; ++i) e.reset_slot(i);
  return 0;
}

namespace {

// Slot s's conv + recurrent state on the host, fp32.
std::vector<float> slot_state(const H200Engine& e, int slot) {
  std::vector<float> s(size_t(kLinearLayers) * (kGdnStateFloats + kConvStateFloats));
  const float* g = e.arena().at<const float>(kBuf_gdn_state) + int64_t(slot) * kLinearLayers * kGdnStateFloats;
  const float* c = e.arena().at<const float>(kBuf_conv_state) + int64_t(slot) * kLinearLayers * kConvStateFloats;
  CUDA_CHECK(cudaStreamSynchronize(e.stream()));
  CUDA_CHECK(cudaMemcpy(s.data(), g, sizeof(float) * kLinearLayers * kGdnStateFloats, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(s.data() + kLinearLayers * kGdnStateFloats, c, sizeof(float) * kLinearLayers * kConvStateFloats,
                        cudaMemcpyDeviceToHost));
  return s;
}

std::vector<float> snapshot_state(const H200Engine& e, int snapshot) {
  std::vector<float> s(size_t(kLinearLayers) * (kGdnStateFloats + kConvStateFloats));
  const uint8_t* at = e.arena().at<const uint8_t>(kBuf_state_snapshots) + snapshot * kSnapshot.slot_bytes();
  CUDA_CHECK(cudaStreamSynchronize(e.stream()));
  CUDA_CHECK(cudaMemcpy(s.data(), at, kSnapshot.state_bytes(), cudaMemcpyDeviceToHost));
  return s;
}

double rel_diff(const float* ref, const float* got, size_t n) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    scale = std::max(scale, double(std::fabs(ref[i])));
    const double d = std::fabs(double(ref[i]) - double(got[i]));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return scale > 0 ? worst / scale : worst;
}

// The prompt through bucket-sized pieces: calls of 32 tokens, below the token path's minimum. Returns
// the last row's logits (valid until the next step).
const float* prefill_buckets(H200Engine& e, int slot, const int32_t* ids, int n, int64_t pos0) {
  static_assert(H200Engine::kTokenPieceMin > 32);
  int last = 0;
  for (int at = 0; at < n; at += 32) {
    const int c = std::min(32, n - at);
    e.prefill(slot, ids + at, c, pos0 + at, at + c == n ? c - 1 : c);
    last = c - 1;
  }
  return e.logits(last);
}

}  // namespace

int run_prefill_check(H200Engine& e, float tol) {
  const int V = int(kVocab);
  int failed = 0;
  auto verdict = [&](const char* what, int n, int64_t pos0, double d) {
    const bool ok = d <= tol;
    failed += !ok;
    std::printf("%s %-28s n %5d from %5lld: worst relative difference %.3g (tolerance %.3g)\n", ok ? "PASS" : "FAIL", what, n,
                (long long)pos0, d, tol);
  };
  for (int n : {64, 131, 700, 2048}) {
    if (n > kPrefillChunk || 2 * n + 300 > kMaxContext) continue;
    const std::vector<int32_t> ids = prompt_of(n, n);
    e.reset_slot(0);
    e.reset_slot(1);
    const float* bucket_logits = prefill_buckets(e, 0, ids.data(), n, 0);
    const std::vector<float> ref(bucket_logits, bucket_logits + V);
    e.prefill(1, ids.data(), n, 0, n - 1);
    verdict("logits, last prompt row", n, 0, rel_diff(ref.data(), e.logits(n - 1), size_t(V)));
    const std::vector<float> sref = slot_state(e, 0), sgot = slot_state(e, 1);
    verdict("recurrent + conv state", n, 0, rel_diff(sref.data(), sgot.data(), sref.size()));
    // Decode after it: both slots in one bucket-2 step, the same token at the same position.
    const int32_t next[2] = {int32_t(11 % V), int32_t(11 % V)};
    const int slots[2] = {0, 1};
    const int64_t pos[2] = {n, n};
    e.decode(2, next, slots, pos, nullptr);
    e.download_logits(2);
    verdict("decode logits after", n, 0, rel_diff(e.logits(0), e.logits(1), size_t(V)));
    // A continuation over the cached prefix (both slots hold n + 1 tokens now).
    const std::vector<int32_t> more = prompt_of(300, n + 1);
    const float* cont_logits = prefill_buckets(e, 0, more.data(), 300, n + 1);
    const std::vector<float> cref(cont_logits, cont_logits + V);
    e.prefill(1, more.data(), 300, n + 1, 299);
    verdict("continuation logits", 300, n + 1, rel_diff(cref.data(), e.logits(299), size_t(V)));
    // A snapshot inside one token-path piece, against the bucket path's state at that boundary.
    const int boundary = (n - 1) / int(kKvPageTokens) * int(kKvPageTokens);
    if (boundary > 0 && n >= H200Engine::kTokenPieceMin) {
      e.reset_slot(0);
      e.reset_slot(1);
      prefill_buckets(e, 0, ids.data(), boundary, 0);
      const PrefillCapture capture{.tokens = boundary, .snapshot = 0};
      e.prefill(1, ids.data(), n, 0, n, nullptr, &capture);
      const std::vector<float> bref = slot_state(e, 0), snap = snapshot_state(e, 0);
      verdict("snapshot inside the piece", boundary, 0, rel_diff(bref.data(), snap.data(), bref.size()));
    }
  }
  // Three streams' rows as one batched piece (slots 0-2, one with a snapshot inside and one
  // continuing a prefix) against each stream alone through bucket-sized pieces (slots 3-5).
  if (kMaxStreams >= 6 && kMaxContext >= 1024) {
    const int len[3] = {100, 37, 500};
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 3; ++i) prompts.push_back(prompt_of(len[i], 50 + i));
    const std::vector<int32_t> prefix = prompt_of(64, 99);
    std::vector<std::vector<float>> ref(3);
    for (int i = 0; i < 6; ++i) e.reset_slot(i);
    for (int s : {1, 4}) prefill_buckets(e, s, prefix.data(), 64, 0);  // stream 1 continues from position 64
    std::vector<float> snap_ref;
    for (int i = 0; i < 3; ++i) {
      const int64_t pos0 = i == 1 ? 64 : 0;
      if (i == 2) {
        prefill_buckets(e, 3 + i, prompts[2].data(), 448, 0);
        snap_ref = slot_state(e, 3 + i);
        const float* l = prefill_buckets(e, 3 + i, prompts[2].data() + 448, len[2] - 448, 448);
        ref[2].assign(l, l + V);
      } else {
        const float* l = prefill_buckets(e, 3 + i, prompts[size_t(i)].data(), len[i], pos0);
        ref[size_t(i)].assign(l, l + V);
      }
    }
    const PrefillCapture capture{.tokens = 448, .snapshot = 1};
    const SamplingKnobs greedy{.temperature = 0.0f};
    std::vector<PrefillSegment> segments;
    for (int i = 0; i < 3; ++i)
      segments.push_back({.slot = i, .ids = prompts[size_t(i)].data(), .n = len[i], .pos0 = i == 1 ? 64 : 0, .knobs = &greedy,
                          .want_logits = true, .capture = i == 2 ? &capture : nullptr});
    e.prefill_batch(segments, 0);
    for (int i = 0; i < 3; ++i) {
      verdict("batched piece: last-row logits", len[i], i == 1 ? 64 : 0, rel_diff(ref[size_t(i)].data(), e.logits(i), size_t(V)));
      const std::vector<float> a = slot_state(e, 3 + i), b = slot_state(e, i);
      verdict("batched piece: state", len[i], i == 1 ? 64 : 0, rel_diff(a.data(), b.data(), a.size()));
    }
    const std::vector<float> snap = snapshot_state(e, 1);
    verdict("batched piece: snapshot", 448, 0, rel_diff(snap_ref.data(), snap.data(), snap.size()));
    for (int i = 0; i < 6; ++i) e.reset_slot(i);
  }
  // A mixed step: D decoding streams (slots 6.., one token each at their own positions) and a 200-token
  // prompt as one prefill_batch, against a decode call of their twins and the prompt through
  // bucket-sized pieces. D = 3 fills a bucket of 4 but one row; D = 5 leaves three padding rows of a
  // bucket of 8 and makes the call's 6 segments fewer than the bucket (the layout that once padded twice).
  for (const int D : {3, 5}) {
    const int dec0 = 6, twin0 = dec0 + D, prompt_slot = twin0 + D, prompt_twin = prompt_slot + 1;
    if (prompt_twin >= kMaxStreams || kMaxContext < 1024) continue;
    const SamplingKnobs greedy{.temperature = 0.0f};
    for (int i = dec0; i <= prompt_twin; ++i) e.reset_slot(i);
    std::vector<int32_t> next;
    std::vector<int> twins;
    std::vector<int64_t> pos;
    for (int i = 0; i < D; ++i) {
      const int len = 20 + 50 * i;
      const std::vector<int32_t> prefix = prompt_of(len, 70 + i);
      for (int s : {dec0 + i, twin0 + i}) prefill_buckets(e, s, prefix.data(), len, 0);
      next.push_back(int32_t((17 + 6 * i) % V));
      twins.push_back(twin0 + i);
      pos.push_back(len);
    }
    const std::vector<int32_t> prompt = prompt_of(200, 80);
    const float* l = prefill_buckets(e, prompt_twin, prompt.data(), 200, 0);
    const std::vector<float> prompt_ref(l, l + V);
    e.decode(D, next.data(), twins.data(), pos.data(), nullptr);
    e.download_logits(D);
    std::vector<std::vector<float>> decode_ref;
    for (int i = 0; i < D; ++i) decode_ref.emplace_back(e.logits(i), e.logits(i) + V);
    std::vector<PrefillSegment> segments;
    for (int i = 0; i < D; ++i)
      segments.push_back({.slot = dec0 + i, .ids = &next[size_t(i)], .n = 1, .pos0 = pos[size_t(i)], .knobs = &greedy,
                          .want_logits = true});
    segments.push_back({.slot = prompt_slot, .ids = prompt.data(), .n = 200, .pos0 = 0, .knobs = &greedy, .want_logits = true});
    e.prefill_batch(segments, D);
    for (int i = 0; i < D; ++i) {
      verdict("mixed step: decode row logits", 1, pos[size_t(i)], rel_diff(decode_ref[size_t(i)].data(), e.logits(i), size_t(V)));
      const std::vector<float> a = slot_state(e, twin0 + i), b = slot_state(e, dec0 + i);
      verdict("mixed step: decode row state", 1, pos[size_t(i)], rel_diff(a.data(), b.data(), a.size()));
    }
    verdict("mixed step: prompt logits", 200, 0, rel_diff(prompt_ref.data(), e.logits(D), size_t(V)));
    const std::vector<float> a = slot_state(e, prompt_twin), b = slot_state(e, prompt_slot);
    verdict("mixed step: prompt state", 200, 0, rel_diff(a.data(), b.data(), a.size()));
    for (int i = dec0; i <= prompt_twin; ++i) e.reset_slot(i);
  }
  // The largest bucket full: every stream slot with its own prompt and token, one decode step over all
  // of them, against each stream's step alone (bucket 1) from the same state: the widest decode
  // kernels (more row groups, another register budget) against the narrowest, which parity checks.
  {
    const int S = int(kMaxStreams);
    std::vector<int32_t> next(static_cast<size_t>(S));
    std::vector<int> slots(static_cast<size_t>(S));
    std::vector<int64_t> pos(static_cast<size_t>(S));
    const auto fill = [&] {
      for (int i = 0; i < S; ++i) {
        const int len = 5 + (7 * i) % 40;
        const std::vector<int32_t> prompt = prompt_of(len, 300 + i);
        e.reset_slot(i);
        prefill_buckets(e, i, prompt.data(), len, 0);
        next[size_t(i)] = int32_t((31 + 97 * i) % V);
        slots[size_t(i)] = i;
        pos[size_t(i)] = len;
      }
    };
    fill();
    e.decode(S, next.data(), slots.data(), pos.data(), nullptr);
    e.download_logits(S);
    std::vector<float> wide(size_t(S) * size_t(V));
    for (int i = 0; i < S; ++i) std::copy(e.logits(i), e.logits(i) + V, wide.begin() + ptrdiff_t(i) * V);
    fill();
    double worst = 0;
    for (int i = 0; i < S; ++i) {
      e.decode(1, &next[size_t(i)], &slots[size_t(i)], &pos[size_t(i)], nullptr);
      e.download_logits(1);
      worst = std::max(worst, rel_diff(e.logits(0), wide.data() + ptrdiff_t(i) * V, size_t(V)));
    }
    verdict("full bucket: decode logits", S, 0, worst);
    for (int i = 0; i < S; ++i) e.reset_slot(i);
  }
  e.reset_slot(0);
  e.reset_slot(1);
  std::printf("prefill-check %s: %d case(s) outside the tolerance\n", failed ? "FAIL" : "PASS", failed);
  return failed ? 1 : 0;
}

}  // namespace rocket
