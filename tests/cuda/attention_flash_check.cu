// GPU check + benchmark for flash-attention prefill over the paged KV cache
// (src/kernels/cuda/attention_flash.cuh) against today's prefill path (attention_prefill.cuh: the
// decode split kernel with each piece token as a row, which tests/cuda/attention_check.cu checks
// against the host reference). Runs on the H200 machine only (CI compiles it). For the tiny and a3b
// shapes, pieces of n in {1, 17, 64, 200, 1024} tokens at pos0 in {0, 100, 4000}:
//  - the page table is a random permutation of the pool; the layer under test is the second of two
//    (the page stride is not the page size); positions from pos0 on, the pages past the piece and
//    every output start as NaN;
//  - the append kernel writes the piece's K and V, then (a) today's path runs over 32-row sub-chunks
//    (attention_paged<S, 32, true>, each with its own first position and qg / out offset) and (b)
//    attention_flash; their outputs are compared, and flash must write nothing past row n of out and
//    nothing in the cache;
//  - then attention_flash is timed at the a3b shape for n = 2048 at pos0 0 and n = 4096 at pos0 28672
//    (both compared too), against today's path.
// Prints PASS/FAIL per case with max abs and rel error; exit 1 on any failure.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "check_support.h"
#include "core/dtype.h"
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/attention_prefill.cuh"

using namespace rocket;

namespace {

using A3b = cuda::AttentionShape<16, 2, 256, 64, 64>;  // plan page: 64 tokens x 2 x 256 bf16 = 64 KiB
using Tiny = cuda::AttentionShape<4, 2, 32, 8, 512>;   // plan page: 512 tokens x 2 x 32 bf16 = 64 KiB
constexpr double kTheta = 1e7;
constexpr float kEps = 1e-6f;
constexpr int kFullLayers = 2, kLayer = 1;  // test the second full-attention layer of two
constexpr int kSub = 32;                    // rows of one sub-chunk of today's path
constexpr int kGuardRows = 16;              // rows past the piece in flash's out that must stay poisoned

// splitmix64: the cache holds up to 33M random values, too slow through <random> distributions.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 40) * (1.0f / 16777216.0f); }
  uint16_t bf16(float lo, float hi) { return f32_to_bf16(uniform(lo, hi)); }
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One piece of n tokens at pos0: build the cache, append, run both paths, compare; timed: also time
// both (median of several runs). Returns false on a failed comparison.
template <class S>
bool run(const char* shape, int n, int pos0, bool timed, uint64_t seed) {
  constexpr int H = S::kHeads, KVH = S::kKvHeads, HD = S::kHeadDim, ROT = S::kRotaryDim, P = S::kPageTokens;
  constexpr int64_t kPageElems = int64_t(P) * KVH * HD;      // one plan page
  constexpr int64_t kStride = 2 * kFullLayers * kPageElems;  // one cache page: K, V of each layer
  constexpr int64_t kKOff = 2 * kLayer * kPageElems, kVOff = kKOff + kPageElems;
  Rng rng{seed};
  // Today's path runs whole sub-chunks: rows n .. n_pad − 1 are padding whose outputs are dropped; its
  // positions past the piece read the poison page.
  const int n_pad = (n + kSub - 1) / kSub * kSub;
  const int pages = (pos0 + n + P - 1) / P;
  const int width = (pos0 + n_pad + P - 1) / P + 1;
  const int pool = pages + 1;  // + the poison page, never written
  std::vector<int32_t> perm(pool);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed));
  std::vector<int32_t> table(width);
  for (int j = 0; j < width; ++j) table[j] = perm[std::min(j, pages)];

  std::vector<uint16_t> cache(size_t(pool) * kStride, 0xffff);  // NaN everywhere nothing was written
  float vmax = 0.0f;
  for (int t = 0; t < pos0; ++t) {
    const int64_t at = int64_t(table[t / P]) * kStride + int64_t(t % P) * KVH * HD;
    // Keys as k_norm + RoPE leave them (rms ~1, here x2 for sharper softmaxes); values in [-1, 1].
    for (int i = 0; i < KVH * HD; ++i) cache[at + kKOff + i] = rng.bf16(-3.4f, 3.4f);
    for (int i = 0; i < KVH * HD; ++i) {
      cache[at + kVOff + i] = rng.bf16(-1.0f, 1.0f);
      vmax = std::max(vmax, std::fabs(bf16_to_f32(cache[at + kVOff + i])));
    }
  }
  std::vector<uint16_t> qg(size_t(n_pad) * H * 2 * HD), k(size_t(n) * KVH * HD), v(k.size()), q_norm(HD), k_norm(HD);
  for (auto& x : qg) x = rng.bf16(-2.0f, 2.0f);  // query halves and gates (sigmoid over about ±2)
  for (auto& x : k) x = rng.bf16(-2.0f, 2.0f);
  for (auto& x : v) {
    x = rng.bf16(-1.0f, 1.0f);
    vmax = std::max(vmax, std::fabs(bf16_to_f32(x)));
  }
  for (auto& x : q_norm) x = rng.bf16(-0.5f, 0.5f);
  for (auto& x : k_norm) x = rng.bf16(-0.5f, 0.5f);
  std::vector<int32_t> sub_pos(n_pad / kSub);
  for (size_t i = 0; i < sub_pos.size(); ++i) sub_pos[i] = pos0 + int(i) * kSub;

  // Rotary positions: every third row an image token's (axes apart), the rest text at their index;
  // both paths rotate by them.
  std::vector<cuda::RopePosition> rope(static_cast<size_t>(n_pad));
  for (int r = 0; r < n_pad; ++r) {
    const int p = pos0 + r;
    rope[size_t(r)] = r % 3 == 1 && p >= 12 ? cuda::RopePosition{p - 12 + r % 2, p - 12 + (5 * r) % 7, p - 12 + (3 * r) % 11}
                                            : cuda::RopePosition::text(p);
  }
  using Tiles = cuda::AttentionTiles<S, kSub>;
  check::DeviceBuffer<uint16_t> d_cache(cache), d_qg(qg), d_k(k), d_v(v), d_qn(q_norm), d_kn(k_norm);
  check::DeviceBuffer<int32_t> d_table(table), d_pos(std::vector<int32_t>{pos0}), d_sub_pos(sub_pos);
  check::DeviceBuffer<float> d_partial(Tiles::kPartialFloats);
  check::DeviceBuffer<cuda::RopePosition> d_rope(rope);
  check::DeviceBuffer<uint16_t> d_ref(size_t(n_pad) * H * HD), d_out(size_t(n + kGuardRows) * H * HD);  // poisoned
  auto bf = [](uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); };
  const cuda::AttentionParams<S> prm{.qg = bf(d_qg.ptr), .k = bf(d_k.ptr), .v = bf(d_v.ptr), .q_norm = bf(d_qn.ptr),
                                     .k_norm = bf(d_kn.ptr), .k_cache = bf(d_cache.ptr) + kKOff,
                                     .v_cache = bf(d_cache.ptr) + kVOff, .page_stride = kStride, .page_table = d_table.ptr,
                                     .table_width = width, .pos = d_pos.ptr, .rope_at = d_rope.ptr, .partial = d_partial.ptr,
                                     .out = bf(d_out.ptr),
                                     .eps = kEps, .rope = cuda::RopeTable<ROT>::make(kTheta)};
  const Stream stream;
  cudaStream_t st = stream.get();

  // The append kernel is templated on the chunk only for its launcher; its grid is the piece.
  cuda::attention_append_kernel<S, 1><<<dim3(n, KVH), 64, 0, st>>>(prm);
  CUDA_CHECK(cudaGetLastError());
  auto today = [&] {
    for (int r0 = 0; r0 < n; r0 += kSub) {
      cuda::AttentionParams<S> sub = prm;
      sub.qg = prm.qg + int64_t(r0) * H * 2 * HD;
      sub.out = bf(d_ref.ptr) + int64_t(r0) * H * HD;
      sub.pos = d_sub_pos.ptr + r0 / kSub;
      sub.rope_at = d_rope.ptr + r0;
      cuda::attention_paged<S, kSub, true>(sub, st);
    }
  };
  auto flash = [&] { cuda::attention_flash<S>(prm, n, pos0, st); };
  today();
  CUDA_CHECK(cudaStreamSynchronize(st));
  const std::vector<uint16_t> cache_before = d_cache.download();
  flash();
  CUDA_CHECK(cudaStreamSynchronize(st));
  const std::vector<uint16_t> ref = d_ref.download(), out = d_out.download(), cache_after = d_cache.download();

  // Tolerance. Both sides round the output to bf16 (2 · 2^-9 |ref|). Flash rounds P to bf16 and
  // normalises by the sum of the rounded P, so its output is a weighted average of V whose weights are
  // each off by at most 2^-8 relative: |δ| <= 2^-8 · Σ p |v − out| <= 2^-8 max|v|. It also rounds the
  // normalised, rotated q to bf16 (as the bf16 HF model does): a score moves by Σ δq_d k_d / √hd, a
  // sum of hd independent roundings of at most 2^-9 |q_d| each, ≈ 2^-9 · √(Σ q_d² k_d²) / √hd ≈ 4e-3
  // (a3b, |k| ~ 2; 2.5e-3 tiny), and the output by at most twice that times the weight moved, allowed
  // another 2^-8 max|v|.
  bool ok = true;
  double max_abs = 0, max_rel = 0, worst = 0;
  long bad = -1;
  for (size_t i = 0; i < size_t(n) * H * HD; ++i) {
    const double g = bf16_to_f32(out[i]), e = bf16_to_f32(ref[i]);
    const double err = std::fabs(g - e), tol = std::ldexp(std::fabs(e), -8) + std::ldexp(double(vmax), -7);
    const double ratio = std::isnan(err) ? INFINITY : err / tol;
    if (std::isnan(err)) max_abs = INFINITY;
    max_abs = std::max(max_abs, err);
    if (std::fabs(e) >= 1.0 / 16) max_rel = std::max(max_rel, err / std::fabs(e));
    worst = std::max(worst, ratio);
    if (!(ratio <= 1.0) && bad < 0) bad = long(i);
  }
  if (bad >= 0) {
    const long per = long(H) * HD;
    std::printf("  first mismatch token %ld (pos %ld) head %ld dim %ld: flash %.6g today %.6g\n", bad / per, pos0 + bad / per,
                (bad % per) / HD, bad % HD, bf16_to_f32(out[bad]), bf16_to_f32(ref[bad]));
    ok = false;
  }
  for (size_t i = size_t(n) * H * HD; i < out.size(); ++i)
    if (out[i] != 0xffff) {
      std::printf("  flash wrote past the piece: out element %zu (row %zu) = 0x%04x\n", i, i / (size_t(H) * HD), out[i]);
      ok = false;
      break;
    }
  if (std::memcmp(cache_before.data(), cache_after.data(), cache_after.size() * 2) != 0) {
    std::printf("  flash wrote into the KV cache\n");
    ok = false;
  }
  std::printf("%-5s n=%-5d pos0=%-6d max abs %.3e  max rel %.3e (|ref| >= 1/16)  err/tol %.3f  %s\n", shape, n, pos0, max_abs,
              max_rel, worst, ok ? "PASS" : "FAIL");

  if (timed) {
    // Causal FLOPs: QKᵀ and PV, 2 · 2 · hd per (row, head, key), keys averaging pos0 + (n + 1) / 2.
    const double flops = 4.0 * n * (pos0 + (n + 1) / 2.0) * HD * H;
    auto time = [&](auto launch, int reps) {
      launch();
      std::vector<float> t;
      for (int r = 0; r < reps; ++r) t.push_back(elapsed_ms(st, launch));
      return median(t);
    };
    const float flash_ms = time(flash, 20), today_ms = time(today, 3);
    std::printf("      timed n=%d pos0=%d: flash %.3f ms %.1f TFLOP/s | today's path %.3f ms %.1f TFLOP/s | %.1fx\n", n, pos0,
                flash_ms, flops / (flash_ms * 1e-3) / 1e12, today_ms, flops / (today_ms * 1e-3) / 1e12, today_ms / flash_ms);
  }
  return ok;
}

template <class S>
bool run_shape(const char* name, uint64_t& seed) {
  bool ok = true;
  for (int pos0 : {0, 100, 4000})
    for (int n : {1, 17, 64, 200, 1024}) ok &= run<S>(name, n, pos0, false, seed++);
  return ok;
}

}  // namespace

int main() {
  try {
    using T = cuda::FlashTiles<A3b>;
    std::printf("flash tiles (a3b): %d rows (%d tokens x %d heads) per block, KV tiles of %d, %d threads, %d B shared\n", T::kRows,
                T::kTokens, T::kGroup, T::kKvTile, T::kThreads, T::kSmemBytes);
    std::printf("tolerance: |flash - today| <= 2^-8 |today| + 2^-7 max|v| (err/tol <= 1 passes)\n");
    uint64_t seed = 1;
    bool ok = run_shape<Tiny>("tiny", seed);
    ok &= run_shape<A3b>("a3b", seed);
    ok &= run<A3b>("a3b", 2048, 0, true, seed++);
    ok &= run<A3b>("a3b", 4096, 28672, true, seed++);
    std::printf("attention flash check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "attention_flash_check: %s\n", e.what());
    return 1;
  }
}
