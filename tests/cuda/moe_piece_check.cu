// GPU check + benchmark for the MoE block of a prefill piece (src/kernels/cuda/moe_piece.cuh) against
// the decode kernels, which are checked against the host (moe_check): the same inputs go through
// moe_piece in one piece and through moe_route<D, 32> + moe_gate_up<D, 32, P> + moe_down<D, 32, P>
// over 32-token blocks. Runs on the H200 machine only (CI compiles it). Per case (tiny and a3b shapes,
// NVFP4 and bf16 routed experts, pieces from 1 token up, random and skewed routings):
//   - choices and router weights must equal the decode path's bit for bit (the same router_row);
//   - the grouping (slot -> token, (token, choice) -> slot) must equal the host's counting sort;
//   - out must equal the decode path's within bf16 rounding: one bf16 ulp of the reference (the two
//     fp32 sums round to neighbouring bf16 values) plus 2^-6 of the row's rms. NOTE: the second term is
//     the bf16 activation between the GEMMs: gate and up sum K = 2048 products (fp32, in another order
//     in each path, mma adds may truncate) at a condition |sum| / sum |w x| of ~1/40, so they differ by
//     ~6e-4 relative and ~15% of the activations round to the other bf16 neighbour; each such flip
//     moves every output of its token by ~w * ulp(act) / top_k, hundreds of them in random
//     directions: measured up to ~1% of the rms (H200: err/bound <= 0.65 on every case). A wrong row, expert,
//     scale or K range moves outputs by ~1/top_k of the rms or more. And at least half of each
//     token's outputs must be bit-identical (a structural error changes nearly all of them);
//   - every output poisoned (NaN) before the launch.
// Then moe_piece is timed at the a3b shape, NVFP4, n = 512, 2048, 4096 (median of 9 runs, cudaEvent,
// per phase too), against the decode path at 2048. Prints PASS/FAIL per case; exit 1 on any failure.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "check_support.h"
#include "compiler/nvfp4_code.h"
#include "core/dtype.h"
#include "kernels/cuda/moe_dispatch.cuh"
#include "kernels/cuda/moe_experts.cuh"
#include "kernels/cuda/moe_piece.cuh"

using namespace rocket;
using check::DeviceBuffer;
using cuda::MoeShape;

namespace {

using Tiny = MoeShape<128, 64, 64, 16, 4>;
using A3b = MoeShape<2048, 512, 512, 256, 8>;
constexpr int kMaxTokens = 4096;
constexpr int kDecodeRows = 32;

uint64_t align(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// One layer's routed experts as an h200 plan's blob holds them (64 KiB units, 256-aligned parts, NVFP4
// in the register code) and the shared expert (bf16).
template <class D, Precision P>
struct Layer {
  static constexpr bool kNvfp4 = P == Precision::kNVFP4;
  ExpertAt at;
  uint64_t stride = 0;
  std::vector<uint8_t> units;
  std::vector<uint16_t> shared;  // gate [SI][H] | up [SI][H] | down [H][SI] | expert gate [H]
  uint8_t* d_units = nullptr;
  __nv_bfloat16* d_shared = nullptr;

  static uint64_t weight_bytes(int rows, int cols) { return kNvfp4 ? uint64_t(rows) * cols / 2 : uint64_t(rows) * cols * 2; }
  static uint64_t unit_read_bytes() {
    const uint64_t w = 2 * weight_bytes(D::kInter, D::kHidden) + weight_bytes(D::kHidden, D::kInter);
    return kNvfp4 ? w + w / 8 : w;  // + one e4m3 scale per 16 weights
  }
  static uint64_t shared_read_bytes() { return 2 * (3ull * D::kSharedInter * D::kHidden + D::kHidden); }

  void build(std::mt19937& rng) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    uint64_t off = 0;
    auto place = [&](LinearAt& l, int rows, int cols) {
      l.weight = off = align(off, 256);
      off += weight_bytes(rows, cols);
      if (kNvfp4) {
        l.scale = off = align(off, 256);
        off += uint64_t(rows) * cols / 16;
        l.scale2 = off = align(off, 256);
        off += 4;
      }
    };
    place(at.gate, D::kInter, D::kHidden);
    place(at.up, D::kInter, D::kHidden);
    place(at.down, D::kHidden, D::kInter);
    stride = align(off, 64 << 10);
    units.assign(stride * D::kExperts, 0);
    std::vector<uint8_t> packed, scales;
    for (int e = 0; e < D::kExperts; ++e) {
      uint8_t* unit = units.data() + uint64_t(e) * stride;
      for (const LinearAt* l : {&at.gate, &at.up, &at.down}) {
        const int rows = l == &at.down ? D::kHidden : D::kInter, cols = l == &at.down ? D::kInter : D::kHidden;
        const uint64_t n = uint64_t(rows) * cols;
        if (kNvfp4) {
          // ModelOpt layout first (random e2m1 nibbles, block scales mostly in the range real
          // checkpoints use, one in eight any finite positive e4m3), then the register code.
          packed.resize(n / 2);
          scales.resize(n / 16);
          for (auto& b : packed) b = uint8_t(byte(rng));
          for (auto& s : scales) s = byte(rng) % 8 == 0 ? uint8_t(byte(rng) % 0x7f) : f32_to_e4m3(24.0f + 212.0f * (u(rng) + 1.0f));
          nvfp4_code::encode_matrix(packed.data(), scales.data(), rows, cols, unit + l->weight, unit + l->scale);
          const float scale2 = (1.0f + 0.5f * u(rng)) * 4e-5f;
          std::memcpy(unit + l->scale2, &scale2, 4);
        } else {
          auto* w = reinterpret_cast<uint16_t*>(unit + l->weight);
          for (uint64_t i = 0; i < n; ++i) w[i] = f32_to_bf16(0.05f * u(rng));
        }
      }
    }
    shared.resize(3 * size_t(D::kSharedInter) * D::kHidden + D::kHidden);
    for (auto& v : shared) v = f32_to_bf16(0.05f * u(rng));
    CUDA_CHECK(cudaMalloc(&d_units, units.size()));
    CUDA_CHECK(cudaMemcpy(d_units, units.data(), units.size(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&d_shared, shared.size() * 2));
    CUDA_CHECK(cudaMemcpy(d_shared, shared.data(), shared.size() * 2, cudaMemcpyHostToDevice));
  }
  ~Layer() {
    cudaFree(d_units);
    cudaFree(d_shared);
  }
  const __nv_bfloat16* part(int i) const {
    const size_t m = size_t(D::kSharedInter) * D::kHidden;
    return d_shared + (i < 3 ? i * m : 3 * m);
  }
};

enum class Routing { kRandom, kSkewed };

// Router logits of n rows (padded to whole decode blocks): random, or half the tokens preferring four
// hot experts (so some experts get far more than one item of tokens). Rows whose k-th and (k+1)-th
// probabilities are within 1e-3 are drawn again, so the top-k is unambiguous.
template <class D>
std::vector<float> make_logits(int rows, Routing routing, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> logits(size_t(rows) * D::kExperts), sorted(D::kExperts);
  for (int t = 0; t < rows; ++t) {
    float* l = logits.data() + size_t(t) * D::kExperts;
    do {
      for (int e = 0; e < D::kExperts; ++e) l[e] = u(rng) + (routing == Routing::kSkewed && t % 2 == 0 && e % 61 == 3 ? 4.0f : 0.0f);
      sorted.assign(l, l + D::kExperts);
      std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    } while (D::kTopK < D::kExperts && sorted[D::kTopK - 1] - sorted[D::kTopK] < 1e-3f);
  }
  return logits;
}

struct Result {
  bool ok = true;
  double max_abs = 0, max_rel = 0, worst_ratio = 0;
  long identical = 0, total = 0;
};

template <class D, Precision P>
struct Piece {
  using W = tiling::MoePieceWorkspace;
  static constexpr W kWork = tiling::moe_piece_workspace(D::kDims, kMaxTokens);
  DeviceBuffer<uint8_t> workspace{size_t(kWork.bytes)};

  cuda::MoePieceParams params(const Layer<D, P>& L, const __nv_bfloat16* x, const float* logits, int32_t* idx, float* w,
                              __nv_bfloat16* out) {
    return {.x = x, .logits = logits, .experts = L.d_units, .expert_stride = L.stride, .expert = L.at,
            .shared_gate = L.part(0), .shared_up = L.part(1), .shared_down = L.part(2), .shared_expert_gate = L.part(3),
            .route_idx = idx, .route_w = w, .workspace = workspace.ptr, .max_tokens = kMaxTokens, .out = out};
  }
  template <typename T>
  std::vector<T> download(int64_t offset, size_t count) const {
    std::vector<T> v(count);
    CUDA_CHECK(cudaMemcpy(v.data(), workspace.ptr + offset, count * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

// The decode path over 32-token blocks: what moe_piece must reproduce.
template <class D, Precision P>
struct Decode {
  using GU = cuda::MoeGateUpTraits<D, kDecodeRows, P>;
  DeviceBuffer<cuda::MoeRoute<D, kDecodeRows>> route{1};
  DeviceBuffer<__nv_bfloat16> act{size_t(kDecodeRows) * D::kTopK * D::kInter}, shared_act{size_t(kDecodeRows) * D::kSharedInter};
  DeviceBuffer<float> shared_scale{kDecodeRows}, partial{size_t(GU::kPartialFloats)};
  DeviceBuffer<int> arrivals{size_t(GU::kArrivals)};
  Decode() { CUDA_CHECK(cudaMemset(arrivals.ptr, 0, arrivals.count * sizeof(int))); }

  void run(const Layer<D, P>& L, const __nv_bfloat16* x, const float* logits, int32_t* idx, float* w, __nv_bfloat16* out,
           int rows, cudaStream_t s) {
    for (int b = 0; b < rows; b += kDecodeRows) {
      int32_t* bi = idx + size_t(b) * D::kTopK;
      float* bw = w + size_t(b) * D::kTopK;
      cuda::moe_route<D, kDecodeRows>({.logits = logits + size_t(b) * D::kExperts, .idx = bi, .weight = bw, .route = route.ptr}, s);
      cuda::moe_gate_up<D, kDecodeRows, P>({.x = x + size_t(b) * D::kHidden, .route = route.ptr, .experts = L.d_units,
                                            .expert_stride = L.stride, .expert = L.at, .shared_gate = L.part(0),
                                            .shared_up = L.part(1), .shared_expert_gate = L.part(3), .act = act.ptr,
                                            .shared_act = shared_act.ptr, .shared_scale = shared_scale.ptr,
                                            .partial = partial.ptr, .arrivals = arrivals.ptr},
                                           s);
      cuda::moe_down<D, kDecodeRows, P>({.route = route.ptr, .route_weight = bw, .experts = L.d_units, .expert_stride = L.stride,
                                         .expert = L.at, .shared_down = L.part(2), .act = act.ptr, .shared_act = shared_act.ptr,
                                         .shared_scale = shared_scale.ptr, .out = out + size_t(b) * D::kHidden},
                                        s);
    }
  }
};

template <class D, Precision P>
bool run_case(const char* shape, const Layer<D, P>& L, Piece<D, P>& piece, Decode<D, P>& decode, int n, Routing routing,
              std::mt19937& rng) {
  constexpr int H = D::kHidden, E = D::kExperts, K = D::kTopK;
  const int rows = (n + kDecodeRows - 1) / kDecodeRows * kDecodeRows;
  const check::Bf16Data x = check::random_bf16(size_t(rows) * H, -2.0f, 2.0f, rng);
  DeviceBuffer<uint16_t> d_x(x.bits);
  DeviceBuffer<float> d_logits(make_logits<D>(rows, routing, rng));
  DeviceBuffer<int32_t> idx_ref(size_t(rows) * K), idx(size_t(rows) * K);
  DeviceBuffer<float> w_ref(size_t(rows) * K), w(size_t(rows) * K);
  DeviceBuffer<uint16_t> out_ref(size_t(rows) * H), out(size_t(rows) * H);
  const auto* xp = reinterpret_cast<const __nv_bfloat16*>(d_x.ptr);

  decode.run(L, xp, d_logits.ptr, idx_ref.ptr, w_ref.ptr, reinterpret_cast<__nv_bfloat16*>(out_ref.ptr), rows, nullptr);
  cuda::moe_piece<D, P>(piece.params(L, xp, d_logits.ptr, idx.ptr, w.ptr, reinterpret_cast<__nv_bfloat16*>(out.ptr)), n, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());

  bool ok = true;
  const auto hi = idx.download(), hi_ref = idx_ref.download();
  const auto hw = w.download(), hw_ref = w_ref.download();
  if (std::memcmp(hi.data(), hi_ref.data(), size_t(n) * K * 4) != 0 || std::memcmp(hw.data(), hw_ref.data(), size_t(n) * K * 4) != 0) {
    std::printf("  choices or router weights differ from the decode path\n");
    ok = false;
  }

  // Grouping: slots by expert ascending, tokens ascending within an expert.
  std::vector<int> slot_token, slot_of(size_t(n) * K, -1);
  for (int e = 0; e < E; ++e)
    for (int t = 0; t < n; ++t)
      for (int k = 0; k < K; ++k)
        if (hi[size_t(t) * K + k] == e) {
          slot_of[size_t(t) * K + k] = int(slot_token.size());
          slot_token.push_back(t);
        }
  using W = typename Piece<D, P>::W;
  const W& l = Piece<D, P>::kWork;
  if (piece.template download<int>(l.slot_token, slot_token.size()) != slot_token ||
      piece.template download<int>(l.slot_of, slot_of.size()) != slot_of) {
    std::printf("  grouping differs from the host's counting sort\n");
    ok = false;
  }

  // Output within bf16 rounding of the decode path.
  const auto ho = out.download(), ho_ref = out_ref.download();
  Result r;
  long first_bad = -1;
  long worst_token = -1;
  for (int t = 0; t < n; ++t) {
    long same = 0;
    for (int j = 0; j < H; ++j) same += ho[size_t(t) * H + j] == ho_ref[size_t(t) * H + j];
    if (2 * same < H && worst_token < 0) worst_token = t;
    double ss = 0;
    for (int j = 0; j < H; ++j) ss += std::pow(double(bf16_to_f32(ho_ref[size_t(t) * H + j])), 2);
    const double rms = std::sqrt(ss / H);
    for (int j = 0; j < H; ++j) {
      const size_t o = size_t(t) * H + j;
      const double a = bf16_to_f32(ho[o]), b = bf16_to_f32(ho_ref[o]);
      const double err = std::fabs(a - b);
      const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(b), 1e-30)) - 7);
      const double bound = ulp + 0x1p-6 * rms;
      r.identical += ho[o] == ho_ref[o];
      ++r.total;
      if (!(err <= bound)) {
        if (first_bad < 0) first_bad = long(o);
        r.ok = false;
      }
      if (std::isnan(a)) r.worst_ratio = INFINITY;
      r.max_abs = std::max(r.max_abs, err);
      r.max_rel = std::max(r.max_rel, err / std::max(std::fabs(b), rms));
      r.worst_ratio = std::max(r.worst_ratio, err / bound);
    }
  }
  if (worst_token >= 0) {
    std::printf("  token %ld: fewer than half of its outputs bit-identical to the decode path\n", worst_token);
    r.ok = false;
  }
  if (first_bad >= 0)
    std::printf("  first mismatch at token %ld col %ld: piece %.7g decode %.7g\n", first_bad / H, first_bad % H,
                bf16_to_f32(ho[first_bad]), bf16_to_f32(ho_ref[first_bad]));
  ok &= r.ok;
  std::printf("%s %-5s %-5s n=%-5d %-7s max abs %.3e max rel %.3e err/bound %.3f identical %5.1f%%\n", ok ? "PASS" : "FAIL", shape,
              precision_name(P), n, routing == Routing::kRandom ? "random" : "skewed", r.max_abs, r.max_rel, r.worst_ratio,
              100.0 * r.identical / std::max(1L, r.total));
  return ok;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// moe_piece at n tokens: median of 9 runs, whole and per phase.
template <class D, Precision P>
void time_piece(const Layer<D, P>& L, Piece<D, P>& piece, Decode<D, P>& decode, int n, std::mt19937& rng) {
  constexpr int H = D::kHidden, K = D::kTopK;
  const check::Bf16Data x = check::random_bf16(size_t(n) * H, -2.0f, 2.0f, rng);
  DeviceBuffer<uint16_t> d_x(x.bits);
  const std::vector<float> logits = make_logits<D>(n, Routing::kRandom, rng);
  DeviceBuffer<float> d_logits(logits);
  DeviceBuffer<int32_t> idx(size_t(n) * K);
  DeviceBuffer<float> w(size_t(n) * K);
  DeviceBuffer<uint16_t> out(size_t(n) * H);
  const cuda::MoePieceParams p = piece.params(L, reinterpret_cast<const __nv_bfloat16*>(d_x.ptr), d_logits.ptr, idx.ptr, w.ptr,
                                              reinterpret_cast<__nv_bfloat16*>(out.ptr));
  const Stream stream;
  cudaStream_t s = stream.get();
  using Phase = void (*)(const cuda::MoePieceParams&, int, cudaStream_t);
  const Phase phases[5] = {cuda::moe_piece_route<D, P>, cuda::moe_piece_group<D, P>, cuda::moe_piece_gate_up<D, P>,
                           cuda::moe_piece_down<D, P>, cuda::moe_piece_combine<D, P>};
  cudaEvent_t ev[6];
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<double> total, part[5];
  for (int rep = 0; rep < 10; ++rep) {
    CUDA_CHECK(cudaEventRecord(ev[0], s));
    for (int i = 0; i < 5; ++i) {
      phases[i](p, n, s);
      CUDA_CHECK(cudaEventRecord(ev[i + 1], s));
    }
    CUDA_CHECK(cudaEventSynchronize(ev[5]));
    if (rep == 0) continue;  // warm-up
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[5]));
    total.push_back(ms);
    for (int i = 0; i < 5; ++i) {
      CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
      part[i].push_back(ms);
    }
  }
  for (auto& e : ev) CUDA_CHECK(cudaEventDestroy(e));
  // Work: 2 * 3 * hidden * inter per routed pair, 2 * 3 * hidden * shared_inter per token; bytes:
  // the weights of the experts this piece routes to, plus the shared expert.
  const std::vector<int32_t> hi = idx.download();
  std::vector<char> used(D::kExperts, 0);
  for (int e : hi) used[e] = 1;
  const int active = int(std::count(used.begin(), used.end(), 1));
  const double flops = 6.0 * H * (double(n) * K * D::kInter + double(n) * D::kSharedInter);
  const double bytes = double(active) * Layer<D, P>::unit_read_bytes() + double(Layer<D, P>::shared_read_bytes());
  const double ms = median(total);
  std::printf("time a3b %-5s n=%-5d %3d experts %8.3f ms %7.1f TFLOP/s %7.0f GB/s of weights  (route %.3f group %.3f gate_up %.3f "
              "down %.3f combine %.3f ms)\n",
              precision_name(P), n, active, ms, flops / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9, median(part[0]),
              median(part[1]), median(part[2]), median(part[3]), median(part[4]));
  if (n == 2048) {
    const int rows = n;
    DeviceBuffer<int32_t> idx2(size_t(rows) * K);
    DeviceBuffer<float> w2(size_t(rows) * K);
    std::vector<double> dec;
    for (int rep = 0; rep < 4; ++rep) {
      const float dms = elapsed_ms(s, [&] {
        decode.run(L, p.x, p.logits, idx2.ptr, w2.ptr, p.out, rows, s);
      });
      if (rep) dec.push_back(dms);
    }
    std::printf("time a3b %-5s n=%-5d decode path (64 x 32-token blocks) %8.3f ms: the piece is %.1fx faster\n", precision_name(P), n,
                median(dec), median(dec) / ms);
  }
}

template <class D, Precision P>
bool run_shape(const char* shape, const std::vector<int>& ns, bool timed, std::mt19937& rng) {
  Layer<D, P> L;
  L.build(rng);
  Piece<D, P> piece;
  Decode<D, P> decode;
  bool ok = true;
  for (int n : ns) ok &= run_case<D, P>(shape, L, piece, decode, n, Routing::kRandom, rng);
  ok &= run_case<D, P>(shape, L, piece, decode, ns.back(), Routing::kSkewed, rng);
  if (timed)
    for (int n : {64, 256, 512, 2048, 4096}) time_piece<D, P>(L, piece, decode, n, rng);
  return ok;
}

}  // namespace

int main() {
  try {
    std::mt19937 rng(20261202);
    bool ok = true;
    ok &= run_shape<Tiny, Precision::kNVFP4>("tiny", {1, 37, 300, 1000}, false, rng);
    ok &= run_shape<Tiny, Precision::kBF16>("tiny", {1, 37, 300, 1000}, false, rng);
    ok &= run_shape<A3b, Precision::kNVFP4>("a3b", {1, 100, 777, 2048}, true, rng);
    ok &= run_shape<A3b, Precision::kBF16>("a3b", {5, 777, 2048}, false, rng);
    std::printf("moe piece check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "moe_piece_check: %s\n", e.what());
    return 1;
  }
}
