// GPU check + benchmark for the linear-attention (GDN) path: the conv1d step
// (src/kernels/cuda/conv1d.cuh) and the fused GDN recurrent step with its gated norm
// (src/kernels/cuda/gdn.cuh). Runs on the H200 machine (CI only compiles it): a3b and tiny shapes,
// decode buckets 1, 8, 32 (row i on a shuffled slot, a second layer's state in the arena, so slot and
// layer offsets are exercised) and prefill chunks of one stream; random data, poisoned outputs; every
// output and every state value compared against the host kernels; times each kernel against a device
// copy measured in the same run. Exit 1 on a mismatch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "check_support.h"
#include "kernels/cuda/conv1d.cuh"
#include "kernels/cuda/gdn.cuh"
#include "kernels/host/activations.h"
#include "kernels/host/conv1d.h"
#include "kernels/host/gdn.h"
#include "kernels/host/rms_norm.h"

using namespace rocket;
using check::DeviceBuffer;

namespace {

constexpr int kLinearLayers = 2;  // state of layer 1 is tested, layer 0 sits before it in each slot
constexpr int kLayer = 1;
constexpr float kEps = 1e-6f;
constexpr double kUnit = 5.96e-8;  // fp32 unit roundoff

const auto bf = [](auto* q) { return reinterpret_cast<__nv_bfloat16*>(q); };

// groups × tokens rows; group g on slot slots[g] (a shuffled set of distinct slots).
std::vector<int32_t> shuffled_slots(int groups, std::mt19937& rng) {
  std::vector<int32_t> all(groups + 1);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(groups);
  return all;
}

// Conv: out = silu(4-term dot product). The device fuses multiply-adds, the host does not: the
// pre-activation differs by at most 8 unit roundoffs of sum |term|, which silu (slope <= 1.1) keeps;
// the output is compared in bf16 ulps beyond that. The state holds inputs: bitwise.
template <int kChannels, int B, bool kPrefill>
bool run_conv(const char* name, int tokens, double copy, std::mt19937& rng) {
  constexpr int kK = 4, kHist = kK - 1;
  const int groups = kPrefill ? 1 : B, rows = groups * tokens;
  const int64_t slot_floats = int64_t(kLinearLayers) * kChannels * kHist;
  const int slots_total = groups + 1;
  const check::Bf16Data x = check::random_bf16(size_t(rows) * kChannels, -2.0f, 2.0f, rng);
  const check::Bf16Data w = check::random_bf16(size_t(kChannels) * kK, -0.8f, 0.8f, rng);
  std::vector<float> state(size_t(slots_total) * slot_floats);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (auto& s : state) s = u(rng);
  const std::vector<int32_t> slots = shuffled_slots(groups, rng);
  DeviceBuffer<uint16_t> dx(x.bits), dw(w.bits), dout(size_t(rows) * kChannels);
  DeviceBuffer<float> dstate(state);
  DeviceBuffer<int32_t> dslots(slots);
  rocket::cuda::Conv1dParams p{.x = bf(dx.ptr), .w = bf(dw.ptr), .state = dstate.ptr + int64_t(kLayer) * kChannels * kHist,
                       .slot_stride = slot_floats, .slots = dslots.ptr, .out = bf(dout.ptr), .tokens = tokens};
  const auto launch = [&] {
    if constexpr (kPrefill) rocket::cuda::conv1d_prefill<B, kChannels, kK>(p, nullptr);
    else rocket::cuda::conv1d_decode<B, kChannels, kK>(p, nullptr);
  };
  launch();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = check::bf16_to_f32(dout.download());
  const std::vector<float> got_state = dstate.download();

  std::vector<float> ref(size_t(rows) * kChannels);
  double worst = 0;
  long bad = -1;
  for (int g = 0; g < groups; ++g) {
    float* s = state.data() + slots[g] * slot_floats + int64_t(kLayer) * kChannels * kHist;
    for (int t = 0; t < tokens; ++t) {
      const int64_t r = int64_t(g) * tokens + t;
      std::vector<float> mag(kChannels);
      for (int c = 0; c < kChannels; ++c) {
        double m = std::fabs(x.f[r * kChannels + c] * w.f[size_t(c) * kK + kHist]);
        for (int j = 0; j < kHist; ++j) m += std::fabs(s[c * kHist + j] * w.f[size_t(c) * kK + j]);
        mag[c] = float(m);
      }
      host::conv1d_step(s, x.f.data() + r * kChannels, w.bits.data(), kChannels, kK, ref.data() + r * kChannels);
      for (int c = 0; c < kChannels; ++c) {
        const int64_t at = r * kChannels + c;
        const double ulps = check::bf16_error_ulps(out[at], ref[at], float(8 * kUnit * 1.1 * mag[c]));
        worst = std::max(worst, ulps);
        if (!(ulps <= 1.0) && bad < 0) bad = long(at);
      }
    }
  }
  long bad_state = -1;
  for (size_t i = 0; i < state.size() && bad_state < 0; ++i)
    if (std::memcmp(&state[i], &got_state[i], 4) != 0) bad_state = long(i);
  const bool ok = bad < 0 && bad_state < 0;
  const double us = check::time_us(launch);
  const double bytes = double(rows) * kChannels * 2 * 2 + kChannels * kK * 2 + double(groups) * kChannels * kHist * 4 * 2;
  check::report(name, kPrefill ? tokens : B, us, bytes, copy, worst, ok);
  if (bad >= 0) std::printf("  first output mismatch at row %ld ch %ld: gpu %.7g host %.7g\n", bad / kChannels, bad % kChannels, out[bad], ref[bad]);
  if (bad_state >= 0) std::printf("  first state mismatch at float %ld: gpu %.7g host %.7g\n", bad_state, got_state[bad_state], state[bad_state]);
  return ok;
}

// GDN: the host engine's sequence (gates from bf16 a/b and the bf16 weights, host::gdn_step,
// host::rms_norm_gated per head) on the same bf16 inputs.
// Tolerance (fp32): per token the Kd-term sums Sᵀk and Sᵀq run in another order (bounded by 4·Kd
// roundings of the head's largest state entry, as q and k have unit l2 norm) and exp may differ by
// 2 ulp; over T tokens the state may drift by T·(4·Kd + 16) roundings of its largest entry. The output
// carries that through o = Sᵀq (sum |q| <= 1) and the gated norm's scale, then bf16 ulps as usual.
template <class S, int B, bool kPrefill>
bool run_gdn(const char* name, int tokens, double copy, std::mt19937& rng) {
  const int groups = kPrefill ? 1 : B, rows = groups * tokens;
  const int64_t head_floats = int64_t(S::kKDim) * S::kVDim, layer_floats = S::kVHeads * head_floats;
  const int64_t slot_floats = kLinearLayers * layer_floats;
  const check::Bf16Data qkv = check::random_bf16(size_t(rows) * S::kConvDim, -1.0f, 1.0f, rng);
  const check::Bf16Data a = check::random_bf16(size_t(rows) * S::kVHeads, -3.0f, 3.0f, rng);
  const check::Bf16Data b = check::random_bf16(size_t(rows) * S::kVHeads, -3.0f, 3.0f, rng);
  const check::Bf16Data z = check::random_bf16(size_t(rows) * S::kValueDim, -3.0f, 3.0f, rng);
  const check::Bf16Data a_log = check::random_bf16(S::kVHeads, -2.0f, 1.0f, rng);
  const check::Bf16Data dt_bias = check::random_bf16(S::kVHeads, -1.0f, 1.0f, rng);
  const check::Bf16Data norm_w = check::random_bf16(S::kVDim, 0.5f, 1.5f, rng);
  std::vector<float> state(size_t(groups + 1) * slot_floats);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (auto& s : state) s = u(rng);
  const std::vector<int32_t> slots = shuffled_slots(groups, rng);

  DeviceBuffer<uint16_t> dqkv(qkv.bits), da(a.bits), db(b.bits), dz(z.bits), dalog(a_log.bits), ddt(dt_bias.bits),
      dnw(norm_w.bits), dout(size_t(rows) * S::kValueDim);
  DeviceBuffer<float> dstate(state);
  DeviceBuffer<int32_t> dslots(slots);
  rocket::cuda::GdnParams p{.qkv = bf(dqkv.ptr), .a = bf(da.ptr), .b = bf(db.ptr), .z = bf(dz.ptr), .a_log = bf(dalog.ptr),
                    .dt_bias = bf(ddt.ptr), .norm_w = bf(dnw.ptr), .state = dstate.ptr + kLayer * layer_floats,
                    .slot_stride = slot_floats, .slots = dslots.ptr, .out = bf(dout.ptr), .tokens = tokens, .eps = kEps};
  const auto launch = [&] {
    if constexpr (kPrefill) rocket::cuda::gdn_prefill<S, B>(p, nullptr);
    else rocket::cuda::gdn_decode<S, B>(p, nullptr);
  };
  launch();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = check::bf16_to_f32(dout.download());
  const std::vector<float> got_state = dstate.download();

  const double tol = tokens * (4.0 * S::kKDim + 16) * kUnit;
  double worst = 0, worst_state = 0;
  long bad = -1, bad_state = -1;
  std::vector<float> o(S::kValueDim), y(S::kValueDim), g(S::kVHeads), beta(S::kVHeads);
  for (int gr = 0; gr < groups; ++gr) {
    float* st = state.data() + slots[gr] * slot_floats + kLayer * layer_floats;
    for (int t = 0; t < tokens; ++t) {
      const int64_t r = int64_t(gr) * tokens + t;
      for (int h = 0; h < S::kVHeads; ++h) {
        beta[h] = host::sigmoid(b.f[r * S::kVHeads + h]);
        g[h] = -std::exp(a_log.f[h]) * host::softplus(a.f[r * S::kVHeads + h] + dt_bias.f[h]);
      }
      const float* q = qkv.f.data() + r * S::kConvDim;
      host::gdn_step(st, q, q + S::kKeyDim, q + 2 * S::kKeyDim, g.data(), beta.data(), S::kKHeads, S::kVHeads,
                     S::kKDim, S::kVDim, o.data());
      for (int h = 0; h < S::kVHeads; ++h) {
        float smax = 0;
        for (int64_t i = 0; i < head_floats; ++i) smax = std::max(smax, std::fabs(st[h * head_floats + i]));
        const float* oh = o.data() + h * S::kVDim;
        const float inv = 1.0f / std::sqrt(host::sum_squares(oh, S::kVDim) / float(S::kVDim) + kEps);
        host::rms_norm_gated(oh, z.f.data() + r * S::kValueDim + h * S::kVDim, norm_w.bits.data(), S::kVDim, kEps,
                             y.data() + h * S::kVDim);
        for (int j = 0; j < S::kVDim; ++j) {
          const int64_t at = r * S::kValueDim + h * S::kVDim + j;
          const float scale = std::fabs(norm_w.f[j] * host::silu(z.f[at]) * inv);
          const double ulps = check::bf16_error_ulps(out[at], y[h * S::kVDim + j], float(tol * smax * scale));
          worst = std::max(worst, ulps);
          if (!(ulps <= 1.0) && bad < 0) bad = long(at);
        }
      }
    }
    for (int h = 0; h < S::kVHeads; ++h) {
      float smax = 0;
      for (int64_t i = 0; i < head_floats; ++i) smax = std::max(smax, std::fabs(st[h * head_floats + i]));
      for (int64_t i = 0; i < head_floats; ++i) {
        const int64_t at = (st - state.data()) + h * head_floats + i;
        const double rel = std::fabs(double(got_state[at]) - state[at]) / smax;
        worst_state = std::max(worst_state, std::isnan(rel) ? INFINITY : rel);
        if (!(rel <= tol) && bad_state < 0) bad_state = long(at);
      }
    }
  }
  // Every other slot and layer is untouched: bitwise.
  for (size_t i = 0; i < state.size(); ++i) {
    const int64_t slot = int64_t(i) / slot_floats, in_slot = int64_t(i) % slot_floats;
    const bool mine = std::find(slots.begin(), slots.end(), int32_t(slot)) != slots.end() && in_slot / layer_floats == kLayer;
    if (!mine && std::memcmp(&state[i], &got_state[i], 4) != 0 && bad_state < 0) bad_state = long(i);
  }
  const bool ok = bad < 0 && bad_state < 0;
  const double us = check::time_us(launch);
  const double bytes = double(groups) * layer_floats * 4 * 2 +
                       double(rows) * (S::kConvDim * 2 + 2 * S::kVHeads * 2 + 2 * S::kValueDim * 2);
  check::report(name, kPrefill ? tokens : B, us, bytes, copy, worst, ok);
  std::printf("  state: worst error %.2e of the head's largest entry (tolerance %.2e)\n", worst_state, tol);
  if (bad >= 0) std::printf("  first output mismatch at row %ld col %ld: gpu %.7g\n", bad / S::kValueDim, bad % S::kValueDim, out[bad]);
  if (bad_state >= 0) std::printf("  first state mismatch at float %ld: gpu %.7g host %.7g\n", bad_state, got_state[bad_state], state[bad_state]);
  return ok;
}

using A3b = rocket::cuda::GdnShape<16, 32, 128, 128>;
using Tiny = rocket::cuda::GdnShape<2, 4, 32, 32>;

}  // namespace

int main() {
  try {
    const double copy = check::device_copy_gbps();
    std::printf("device copy (read+write): %.0f GB/s; %% column = achieved / copy; worst in bf16 ulps\n", copy);
    std::mt19937 rng(5);
    bool ok = true;
    ok &= run_conv<A3b::kConvDim, 1, false>("conv1d a3b 8192ch decode", 1, copy, rng);
    ok &= run_conv<A3b::kConvDim, 8, false>("conv1d a3b 8192ch decode", 1, copy, rng);
    ok &= run_conv<A3b::kConvDim, 32, false>("conv1d a3b 8192ch decode", 1, copy, rng);
    ok &= run_conv<A3b::kConvDim, 32, true>("conv1d a3b 8192ch prefill (B=T)", 32, copy, rng);
    ok &= run_conv<Tiny::kConvDim, 8, false>("conv1d tiny 256ch decode", 1, copy, rng);
    ok &= run_conv<Tiny::kConvDim, 32, true>("conv1d tiny 256ch prefill (B=T)", 7, copy, rng);
    ok &= run_gdn<A3b, 1, false>("gdn a3b decode", 1, copy, rng);
    ok &= run_gdn<A3b, 8, false>("gdn a3b decode", 1, copy, rng);
    ok &= run_gdn<A3b, 16, false>("gdn a3b decode", 1, copy, rng);
    ok &= run_gdn<A3b, 32, false>("gdn a3b decode", 1, copy, rng);
    ok &= run_gdn<A3b, 32, true>("gdn a3b prefill (B=T)", 32, copy, rng);
    ok &= run_gdn<A3b, 32, true>("gdn a3b prefill (B=T)", 5, copy, rng);
    ok &= run_gdn<Tiny, 1, false>("gdn tiny decode", 1, copy, rng);
    ok &= run_gdn<Tiny, 32, false>("gdn tiny decode", 1, copy, rng);
    ok &= run_gdn<Tiny, 32, true>("gdn tiny prefill (B=T)", 32, copy, rng);
    std::printf("gdn check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "gdn_check: %s\n", e.what());
    return 1;
  }
}
