// GPU check + benchmark for the MoE block's dispatch and grouped experts (src/kernels/cuda/
// moe_dispatch.cuh, moe_experts.cuh). Runs on the H200 machine only (CI compiles it). For tiny and a3b
// shapes, NVFP4 and bf16 routed experts, buckets 1/8/32 and three routings (random router logits; every
// row choosing nearly the same experts; every slot a distinct expert where B * top_k <= experts):
//   - the route (counts, expert list, slots) must equal the host's grouping exactly;
//   - every MoE output and shared-expert gate is compared with the host kernels (router_top_k, linear on
//     the stored weights, swiglu, sigmoid) on the same bf16 inputs, within a bound derived per element;
//   - a CUDA-graph replay of the step must reproduce the direct launch bit for bit, and so must the
//     last step of the timed graph (moe_down is a programmatic dependent launch of moe_gate_up);
//   - the step is timed as a graph of many steps, each on other experts and another copy of the shared
//     expert so weights come from HBM, not L2, against a device-to-device copy measured in the same run.
// Prints a table; exit 1 on any mismatch.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "check_support.h"
#include "route_check.h"
#include "compiler/nvfp4_code.h"
#include "core/dtype.h"
#include "kernels/cuda/moe_dispatch.cuh"
#include "kernels/cuda/moe_experts.cuh"
#include "kernels/host/activations.h"
#include "kernels/host/dense.h"
#include "kernels/host/moe.h"

using namespace rocket;
using cuda::MoeShape;

namespace {

using Tiny = MoeShape<128, 64, 64, 16, 4>;
using A3b = MoeShape<2048, 512, 512, 256, 8>;

constexpr int kTimedSteps = 48;    // steps per timed graph
constexpr int kSharedCopies = 24;  // a3b: 24 x 6.3 MB of shared expert, twice the L2

struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return float(int64_t(next()) >> 40) * (1.0f / float(1ull << 23)); }  // [-1, 1)
};

uint64_t align(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// One layer's routed experts laid out as the plan lays them (64 KiB units, 256-aligned parts), the
// shared expert, and a sign-stripped copy of everything: host::linear on |W| and |x| gives the
// magnitude sums that bound rounding error.
template <class D, Precision P>
struct Layer {
  ExpertAt at;
  uint64_t stride = 0;
  std::vector<uint8_t> units, abs_units;
  std::vector<uint16_t> sg, su, sd, sgate, abs_sg, abs_su, abs_sd, abs_sgate;  // shared expert, bf16
  uint8_t* d_units = nullptr;
  __nv_bfloat16* d_shared = nullptr;  // kSharedCopies x [gate | up | down | gate vector]
  size_t shared_elems = 0;

  static constexpr bool kNvfp4 = P == Precision::kNVFP4;
  // [rows, cols] of one of an expert's matrices: down is hidden x inter, gate and up inter x hidden.
  std::pair<int, int> dims(const LinearAt& l) const {
    return &l == &at.down ? std::pair{D::kHidden, D::kInter} : std::pair{D::kInter, D::kHidden};
  }
  static uint64_t weight_bytes(int rows, int cols) { return kNvfp4 ? uint64_t(rows) * cols / 2 : uint64_t(rows) * cols * 2; }
  uint64_t unit_read_bytes() const {  // what one expert's gate, up and down cost to stream
    const uint64_t w = 2 * weight_bytes(D::kInter, D::kHidden) + weight_bytes(D::kHidden, D::kInter);
    return kNvfp4 ? w + w / 8 : w;  // + e4m3 scale per 16 weights (= 1/8 of the packed bytes)
  }

  host::WeightView view(const std::vector<uint8_t>& u, int e, const LinearAt& l, int rows, int cols) const {
    const uint8_t* base = u.data() + uint64_t(e) * stride;
    host::WeightView v{.precision = P, .rows = rows, .cols = cols, .data = base + l.weight};
    if (kNvfp4) {
      v.scale16 = base + l.scale;
      std::memcpy(&v.scale2, base + l.scale2, 4);
    }
    return v;
  }

  void build(SplitMix& rng) {
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
    abs_units.assign(units.size(), 0);
    for (int e = 0; e < D::kExperts; ++e) {
      uint8_t* u = units.data() + uint64_t(e) * stride;
      for (const LinearAt* l : {&at.gate, &at.up, &at.down}) {
        const auto [rows, cols] = dims(*l);
        const uint64_t n = uint64_t(rows) * cols;
        if (kNvfp4) {
          for (uint64_t i = 0; i < n / 2; ++i) u[l->weight + i] = uint8_t(rng.next());
          // Block scales: mostly the normal range real checkpoints use, one in eight any finite e4m3
          // code (subnormals and zero included); global scale so weights are ~0.02.
          for (uint64_t i = 0; i < n / 16; ++i) {
            const uint64_t r = rng.next();
            uint8_t s = f32_to_e4m3(24.0f + 212.0f * (rng.uniform() + 1.0f));
            if ((r & 7) == 0) s = uint8_t((r >> 8) % 0x7f);  // 0x00..0x7e: positive, finite
            u[l->scale + i] = s;
          }
          const float scale2 = (1.0f + 0.5f * rng.uniform()) * 4e-5f;
          std::memcpy(u + l->scale2, &scale2, 4);
        } else {
          auto* w = reinterpret_cast<uint16_t*>(u + l->weight);
          for (uint64_t i = 0; i < n; ++i) w[i] = f32_to_bf16(0.05f * rng.uniform());
        }
      }
    }
    // |W|: e2m1 and bf16 are sign-magnitude, scales are positive: clearing sign bits is exact.
    for (size_t i = 0; i < units.size(); ++i) abs_units[i] = units[i];
    for (int e = 0; e < D::kExperts; ++e)
      for (const LinearAt* l : {&at.gate, &at.up, &at.down}) {
        const auto [rows, cols] = dims(*l);
        uint8_t* a = abs_units.data() + uint64_t(e) * stride + l->weight;
        if (kNvfp4) {
          for (uint64_t i = 0; i < uint64_t(rows) * cols / 2; ++i) a[i] &= 0x77;
        } else {
          for (uint64_t i = 0; i < uint64_t(rows) * cols; ++i) a[2 * i + 1] &= 0x7f;
        }
      }
    auto fill = [&](std::vector<uint16_t>& v, std::vector<uint16_t>& abs, size_t n) {
      v.resize(n);
      abs.resize(n);
      for (size_t i = 0; i < n; ++i) abs[i] = (v[i] = f32_to_bf16(0.05f * rng.uniform())) & 0x7fff;
    };
    fill(sg, abs_sg, size_t(D::kSharedInter) * D::kHidden);
    fill(su, abs_su, size_t(D::kSharedInter) * D::kHidden);
    fill(sd, abs_sd, size_t(D::kHidden) * D::kSharedInter);
    fill(sgate, abs_sgate, D::kHidden);

    // The device reads what an h200 plan's blob holds: NVFP4 parts in the register code.
    std::vector<uint8_t> coded = units;
    if (kNvfp4)
      for (int e = 0; e < D::kExperts; ++e)
        for (const LinearAt* l : {&at.gate, &at.up, &at.down}) {
          const auto [rows, cols] = dims(*l);
          const uint64_t base = uint64_t(e) * stride;
          nvfp4_code::encode_matrix(units.data() + base + l->weight, units.data() + base + l->scale, rows, cols,
                                    coded.data() + base + l->weight, coded.data() + base + l->scale);
        }
    CUDA_CHECK(cudaMalloc(&d_units, coded.size()));
    CUDA_CHECK(cudaMemcpy(d_units, coded.data(), coded.size(), cudaMemcpyHostToDevice));
    shared_elems = sg.size() + su.size() + sd.size() + sgate.size();
    CUDA_CHECK(cudaMalloc(&d_shared, shared_elems * 2 * kSharedCopies));
    size_t at_elem = 0;
    for (const auto* v : {&sg, &su, &sd, &sgate}) {
      CUDA_CHECK(cudaMemcpy(d_shared + at_elem, v->data(), v->size() * 2, cudaMemcpyHostToDevice));
      at_elem += v->size();
    }
    for (int c = 1; c < kSharedCopies; ++c)
      CUDA_CHECK(cudaMemcpy(d_shared + c * shared_elems, d_shared, shared_elems * 2, cudaMemcpyDeviceToDevice));
  }
  void release() {
    CUDA_CHECK(cudaFree(d_units));
    CUDA_CHECK(cudaFree(d_shared));
  }
  const __nv_bfloat16* shared_part(int copy, int part) const {
    const size_t offs[4] = {0, sg.size(), sg.size() + su.size(), sg.size() + su.size() + sd.size()};
    return d_shared + copy * shared_elems + offs[part];
  }
};

enum class Routing { kRandom, kSame, kDistinct };
const char* routing_name(Routing r) { return r == Routing::kRandom ? "random" : r == Routing::kSame ? "same" : "distinct"; }

// Router logits for B rows, then host::router_top_k: the choices and weights the GPU kernels consume.
template <class D>
void route(Routing routing, int B, SplitMix& rng, std::vector<int>& idx, std::vector<float>& w) {
  std::vector<float> logits(D::kExperts), common(D::kExperts);
  for (auto& v : common) v = 3.0f * rng.uniform();
  idx.resize(size_t(B) * D::kTopK);
  w.resize(idx.size());
  for (int b = 0; b < B; ++b) {
    for (int e = 0; e < D::kExperts; ++e) {
      if (routing == Routing::kRandom) logits[e] = 3.0f * rng.uniform();
      if (routing == Routing::kSame) logits[e] = common[e] + 1e-3f * rng.uniform();
      if (routing == Routing::kDistinct) logits[e] = (e / D::kTopK == b ? 8.0f : 0.0f) + rng.uniform();
    }
    host::router_top_k(logits.data(), D::kExperts, D::kTopK, idx.data() + b * D::kTopK, w.data() + b * D::kTopK);
  }
}

struct Buffers {  // device buffers of one bucket, poisoned where the kernels must write
  void *idx, *w, *route, *act, *shared_act, *shared_scale, *partial, *arrivals, *out, *x;
};

template <class D, int B, Precision P>
struct Case {
  using GU = cuda::MoeGateUpTraits<D, B, P>;
  using Route = cuda::MoeRoute<D, B>;
  static constexpr int kSlots = B * D::kTopK;

  // Launches one step: routing i (idx/w/route at slot i), shared expert copy `copy`.
  static void step(const Layer<D, P>& L, const Buffers& d, int i, int copy, cudaStream_t s, int what = 7) {
    const int* idx = static_cast<const int*>(d.idx) + i * kSlots;
    const float* w = static_cast<const float*>(d.w) + i * kSlots;
    Route* route = static_cast<Route*>(d.route) + i;
    if (what & 1) cuda::moe_dispatch<D, B>({.idx = idx, .route = route}, s);
    if (what & 2)
      cuda::moe_gate_up<D, B, P>({.x = static_cast<const __nv_bfloat16*>(d.x), .route = route, .experts = L.d_units,
                                  .expert_stride = L.stride, .expert = L.at, .shared_gate = L.shared_part(copy, 0),
                                  .shared_up = L.shared_part(copy, 1), .shared_expert_gate = L.shared_part(copy, 3),
                                  .act = static_cast<__nv_bfloat16*>(d.act), .shared_act = static_cast<__nv_bfloat16*>(d.shared_act),
                                  .shared_scale = static_cast<float*>(d.shared_scale), .partial = static_cast<float*>(d.partial),
                                  .arrivals = static_cast<int*>(d.arrivals)},
                                 s);
    if (what & 4)
      cuda::moe_down<D, B, P>({.route = route, .route_weight = w, .experts = L.d_units, .expert_stride = L.stride,
                               .expert = L.at, .shared_down = L.shared_part(copy, 2),
                               .act = static_cast<const __nv_bfloat16*>(d.act),
                               .shared_act = static_cast<const __nv_bfloat16*>(d.shared_act),
                               .shared_scale = static_cast<const float*>(d.shared_scale),
                               .out = static_cast<__nv_bfloat16*>(d.out)},
                              s);
  }
};

// fp32 accumulation error bound for a dot product of length K relative to sum |w x|: the GPU adds 16
// exact products per mma step (truncating adds allowed: 2^-23 each) plus a few partial sums; the host
// kernel rounds about K/8 + 8 times (2^-24 each).
double gamma(int K) { return (K / 16.0 + 16) * 0x1p-23 + (K / 8.0 + 16) * 0x1p-24; }

// Microseconds per step of a graph of kTimedSteps steps (launch bits `what`), best of 5 replays.
template <class D, int B, Precision P>
double time_steps(const Layer<D, P>& L, const Buffers& d, int what) {
  const double ms = check::graph_time_ms([&](cudaStream_t s) {
    for (int i = 0; i < kTimedSteps; ++i) Case<D, B, P>::step(L, d, i, i % kSharedCopies, s, what);
  }, 5);
  return 1e3 * ms / kTimedSteps;
}

template <class D, int B, Precision P>
bool run(const char* name, const Layer<D, P>& L, Routing routing, double copy_gbps, SplitMix& rng) {
  using C = Case<D, B, P>;
  using GU = typename C::GU;
  using Route = typename C::Route;
  constexpr int kSlots = C::kSlots, H = D::kHidden, I = D::kInter, SI = D::kSharedInter, K = D::kTopK;

  // Inputs: kTimedSteps routings (step 0 is the checked one) and one x.
  std::vector<int> idx;
  std::vector<float> w;
  std::vector<int> all_idx;
  std::vector<float> all_w;
  for (int i = 0; i < kTimedSteps; ++i) {
    route<D>(routing, B, rng, idx, w);
    all_idx.insert(all_idx.end(), idx.begin(), idx.end());
    all_w.insert(all_w.end(), w.begin(), w.end());
  }
  idx.assign(all_idx.begin(), all_idx.begin() + kSlots);
  w.assign(all_w.begin(), all_w.begin() + kSlots);
  std::vector<uint16_t> x(size_t(B) * H);
  std::vector<float> xf(x.size()), xabs(x.size());
  for (size_t i = 0; i < x.size(); ++i) xabs[i] = std::fabs(xf[i] = bf16_to_f32(x[i] = f32_to_bf16(2.0f * rng.uniform())));

  Buffers d;
  CUDA_CHECK(cudaMalloc(&d.idx, all_idx.size() * 4));
  CUDA_CHECK(cudaMalloc(&d.w, all_w.size() * 4));
  CUDA_CHECK(cudaMalloc(&d.route, sizeof(Route) * kTimedSteps));
  CUDA_CHECK(cudaMalloc(&d.act, size_t(kSlots) * I * 2));
  CUDA_CHECK(cudaMalloc(&d.shared_act, size_t(B) * SI * 2));
  CUDA_CHECK(cudaMalloc(&d.shared_scale, B * 4));
  CUDA_CHECK(cudaMalloc(&d.partial, size_t(GU::kPartialFloats) * 4));
  CUDA_CHECK(cudaMalloc(&d.arrivals, GU::kArrivals * 4));
  CUDA_CHECK(cudaMalloc(&d.out, size_t(B) * H * 2));
  CUDA_CHECK(cudaMalloc(&d.x, x.size() * 2));
  CUDA_CHECK(cudaMemcpy(d.idx, all_idx.data(), all_idx.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.w, all_w.data(), all_w.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.x, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  // Poison everything the kernels write (NaN in bf16 and fp32, -1 in ints); arrivals start at zero.
  CUDA_CHECK(cudaMemset(d.route, 0xff, sizeof(Route) * kTimedSteps));
  CUDA_CHECK(cudaMemset(d.act, 0xff, size_t(kSlots) * I * 2));
  CUDA_CHECK(cudaMemset(d.shared_act, 0xff, size_t(B) * SI * 2));
  CUDA_CHECK(cudaMemset(d.shared_scale, 0xff, B * 4));
  CUDA_CHECK(cudaMemset(d.partial, 0xff, size_t(GU::kPartialFloats) * 4));
  CUDA_CHECK(cudaMemset(d.arrivals, 0, GU::kArrivals * 4));
  CUDA_CHECK(cudaMemset(d.out, 0xff, size_t(B) * H * 2));

  C::step(L, d, 0, 0, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> out(size_t(B) * H);
  std::vector<float> sscale(B);
  Route r;
  CUDA_CHECK(cudaMemcpy(out.data(), d.out, out.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(sscale.data(), d.shared_scale, B * 4, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&r, d.route, sizeof(Route), cudaMemcpyDeviceToHost));

  // Route: the host grouping (experts ascending, rows ascending within an expert).
  bool ok = check::route_matches_host(r, idx, D::kExperts, K);
  std::vector<int> count(D::kExperts, 0);
  for (int e : idx) ++count[e];
  const int active = int(std::count_if(count.begin(), count.end(), [](int c) { return c > 0; }));

  // Host reference and a per-element error bound. Per expert: g, u (host::linear), their magnitude
  // sums (host::linear on |W|, |x|), act = swiglu; act's bound = bf16 rounding (2^-9 |act|) plus the
  // fp32 error of g and u carried through silu (|silu'| <= 1.1); then the down projection of act, of
  // |act| and of act's bound.
  std::vector<double> ref(size_t(B) * H, 0.0), tol(size_t(B) * H, 0.0), mag(size_t(B) * H, 0.0);
  auto expert_ffn = [&](const host::WeightView (&v)[3], const host::WeightView (&a)[3], const std::vector<int>& rows,
                        int inter, const std::vector<float>& scale, const std::vector<double>& scale_err) {
    const int m = int(rows.size());
    std::vector<float> X(size_t(m) * H), Xa(X.size());
    for (int i = 0; i < m; ++i)
      for (int k = 0; k < H; ++k) {
        X[size_t(i) * H + k] = xf[size_t(rows[i]) * H + k];
        Xa[size_t(i) * H + k] = xabs[size_t(rows[i]) * H + k];
      }
    std::vector<float> g(size_t(m) * inter), u(g.size()), ga(g.size()), ua(g.size()), act(g.size()), acta(g.size()), actb(g.size());
    host::linear(v[0], X.data(), m, g.data());
    host::linear(v[1], X.data(), m, u.data());
    host::linear(a[0], Xa.data(), m, ga.data());
    host::linear(a[1], Xa.data(), m, ua.data());
    host::swiglu(g.data(), u.data(), int(g.size()), act.data());
    for (size_t i = 0; i < g.size(); ++i) {
      acta[i] = std::fabs(act[i]);
      actb[i] = float(0x1p-9 * acta[i] + gamma(H) * (1.1 * std::fabs(u[i]) * ga[i] + std::fabs(host::silu(g[i])) * ua[i]));
    }
    std::vector<float> y(size_t(m) * H), ya(y.size()), yb(y.size());
    host::linear(v[2], act.data(), m, y.data());
    host::linear(a[2], acta.data(), m, ya.data());
    host::linear(a[2], actb.data(), m, yb.data());
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < H; ++j) {
        const size_t o = size_t(rows[i]) * H + j, q = size_t(i) * H + j;
        ref[o] += double(scale[i]) * y[q];
        mag[o] += double(scale[i]) * ya[q];
        tol[o] += double(scale[i]) * (yb[q] + gamma(inter) * ya[q]) + scale_err[i] * std::fabs(y[q]);
      }
  };
  for (int e = 0; e < D::kExperts; ++e) {
    if (!count[e]) continue;
    std::vector<int> rows;
    std::vector<float> scale;
    for (int s = 0; s < kSlots; ++s)
      if (idx[s] == e) {
        rows.push_back(s / K);
        scale.push_back(w[s]);
      }
    const host::WeightView v[3] = {L.view(L.units, e, L.at.gate, I, H), L.view(L.units, e, L.at.up, I, H),
                                   L.view(L.units, e, L.at.down, H, I)};
    const host::WeightView a[3] = {L.view(L.abs_units, e, L.at.gate, I, H), L.view(L.abs_units, e, L.at.up, I, H),
                                   L.view(L.abs_units, e, L.at.down, H, I)};
    expert_ffn(v, a, rows, I, scale, std::vector<double>(rows.size(), 0.0));
  }
  // Shared expert, scaled by sigmoid(gate . x): its fp32 error (|sigmoid'| <= 1/4) scales |y|.
  auto bf16_view = [](const std::vector<uint16_t>& m, int rows, int cols) {
    return host::WeightView{.precision = Precision::kBF16, .rows = rows, .cols = cols, .data = m.data()};
  };
  std::vector<float> logit(B), logit_abs(B), sref(B);
  host::linear(bf16_view(L.sgate, 1, H), xf.data(), B, logit.data());
  host::linear(bf16_view(L.abs_sgate, 1, H), xabs.data(), B, logit_abs.data());
  std::vector<int> all_rows(B);
  std::vector<double> serr(B);
  for (int b = 0; b < B; ++b) {
    all_rows[b] = b;
    sref[b] = host::sigmoid(logit[b]);
    serr[b] = 0.25 * gamma(H) * logit_abs[b] + 0x1p-22;
    if (!(std::fabs(sscale[b] - sref[b]) <= serr[b])) {
      if (ok) std::printf("  shared expert gate row %d: gpu %.8g host %.8g\n", b, sscale[b], sref[b]);
      ok = false;
    }
  }
  const host::WeightView sv[3] = {bf16_view(L.sg, SI, H), bf16_view(L.su, SI, H), bf16_view(L.sd, H, SI)};
  const host::WeightView sa[3] = {bf16_view(L.abs_sg, SI, H), bf16_view(L.abs_su, SI, H), bf16_view(L.abs_sd, H, SI)};
  expert_ffn(sv, sa, all_rows, SI, sref, serr);

  // Output: bound above plus the output's own bf16 rounding (half an ulp, 2^-9 relative) and the fp32
  // weighted sum (k + 1 terms, 2^-22 of their magnitudes).
  double worst = 0;
  long bad = -1;
  for (size_t o = 0; o < out.size(); ++o) {
    const double g = bf16_to_f32(out[o]);
    const double bound = tol[o] + 0x1p-9 * std::fabs(ref[o]) + 0x1p-22 * mag[o];
    const double err = std::fabs(g - ref[o]);
    const double rel = err / (bound + 1e-300);
    if (!(rel <= worst)) worst = std::isnan(rel) ? INFINITY : rel;
    if (!(err <= bound) && bad < 0) bad = long(o);
  }
  if (bad >= 0) {
    std::printf("  first mismatch at row %ld col %ld: gpu %.7g host %.7g bound %.3g\n", bad / H, bad % H,
                bf16_to_f32(out[bad]), ref[bad], tol[bad] + 0x1p-9 * std::fabs(ref[bad]));
    ok = false;
  }

  // Graph replay of the checked step: bit-exact with the direct launch.
  {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    C::step(L, d, 0, 0, s);
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int rep = 0; rep < 2 && ok; ++rep) {
      CUDA_CHECK(cudaMemsetAsync(d.out, 0xff, out.size() * 2, s));
      CUDA_CHECK(cudaGraphLaunch(ge, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      std::vector<uint16_t> again(out.size());
      CUDA_CHECK(cudaMemcpy(again.data(), d.out, again.size() * 2, cudaMemcpyDeviceToHost));
      if (std::memcmp(again.data(), out.data(), out.size() * 2) != 0) {
        std::printf("  graph replay %d differs from the direct launch\n", rep);
        ok = false;
      }
    }
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));
    CUDA_CHECK(cudaStreamDestroy(s));
  }

  // Timing: bytes a step must move = weights of its active experts + the shared expert + activations.
  double weight_bytes = 0;
  for (int i = 0; i < kTimedSteps; ++i) {
    std::vector<char> used(D::kExperts, 0);
    for (int s = 0; s < kSlots; ++s) used[all_idx[size_t(i) * kSlots + s]] = 1;
    for (char u : used) weight_bytes += u ? double(L.unit_read_bytes()) : 0.0;
  }
  weight_bytes = weight_bytes / kTimedSteps + double(L.shared_elems) * 2;
  const double act_bytes = 2.0 * (2.0 * B * H + 2.0 * kSlots * I + 2.0 * B * SI);
  for (int i = 1; i < kTimedSteps; ++i) Case<D, B, P>::step(L, d, i, 0, nullptr, 1);  // routes for the per-kernel graphs
  CUDA_CHECK(cudaDeviceSynchronize());  // the timed graphs run on a non-blocking stream
  const double us = time_steps<D, B, P>(L, d, 7);
  // The timed graph ran kTimedSteps steps back to back, each moe_down a programmatic dependent of its
  // gate_up: its last step's output must equal a direct launch of that step, bit for bit.
  {
    std::vector<uint16_t> timed(size_t(B) * H), direct(size_t(B) * H);
    CUDA_CHECK(cudaMemcpy(timed.data(), d.out, timed.size() * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemset(d.out, 0xff, size_t(B) * H * 2));
    C::step(L, d, kTimedSteps - 1, (kTimedSteps - 1) % kSharedCopies, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(direct.data(), d.out, direct.size() * 2, cudaMemcpyDeviceToHost));
    if (std::memcmp(timed.data(), direct.data(), timed.size() * 2) != 0) {
      std::printf("  timed graph: last step differs from its direct launch\n");
      ok = false;
    }
  }
  const double us_gu = time_steps<D, B, P>(L, d, 2);
  const double us_down = time_steps<D, B, P>(L, d, 4);
  const double gbps = (weight_bytes + act_bytes) / (us * 1e-6) / 1e9;
  std::printf("%-5s %-5s B=%-2d %-8s %3d exp %8.1f us (gate_up %6.1f, down %6.1f) %7.2f MB %6.0f GB/s %5.1f%%  err/bound %.2f %s\n",
              name, precision_name(P), B, routing_name(routing), active, us, us_gu, us_down, (weight_bytes + act_bytes) / 1e6,
              gbps, 100.0 * gbps / copy_gbps, worst, ok ? "ok" : "MISMATCH");
  for (void* p : {d.idx, d.w, d.route, d.act, d.shared_act, d.shared_scale, d.partial, d.arrivals, d.out, d.x}) CUDA_CHECK(cudaFree(p));
  return ok;
}

template <class D, Precision P>
bool run_shape(const char* name, double copy_gbps, SplitMix& rng) {
  Layer<D, P> L;
  L.build(rng);
  bool ok = true;
  for (Routing routing : {Routing::kRandom, Routing::kSame, Routing::kDistinct}) {
    ok &= run<D, 1, P>(name, L, routing, copy_gbps, rng);
    if (routing != Routing::kDistinct || 8 * D::kTopK <= D::kExperts) ok &= run<D, 8, P>(name, L, routing, copy_gbps, rng);
    if (routing != Routing::kDistinct || 16 * D::kTopK <= D::kExperts) ok &= run<D, 16, P>(name, L, routing, copy_gbps, rng);
    if (routing != Routing::kDistinct || 32 * D::kTopK <= D::kExperts) ok &= run<D, 32, P>(name, L, routing, copy_gbps, rng);
  }
  L.release();
  return ok;
}

}  // namespace

int main() {
  try {
    const double copy = check::device_copy_gbps();
    std::printf("device copy (read+write, 2 GiB): %.0f GB/s; %% column = achieved / copy; bytes = active experts' "
                "weights + shared expert + activations, per step\n",
                copy);
    SplitMix rng{7};
    bool ok = true;
    ok &= run_shape<Tiny, Precision::kNVFP4>("tiny", copy, rng);
    ok &= run_shape<Tiny, Precision::kBF16>("tiny", copy, rng);
    ok &= run_shape<A3b, Precision::kNVFP4>("a3b", copy, rng);
    ok &= run_shape<A3b, Precision::kBF16>("a3b", copy, rng);
    std::printf("moe check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "moe_check: %s\n", e.what());
    return 1;
  }
}
