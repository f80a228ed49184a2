// GPU check + benchmark for the MoE router (src/kernels/cuda/router.cuh) and the MoE block's routing
// (moe_route in moe_dispatch.cuh: router + grouping, one kernel at small buckets): a3b (256 experts,
// top-8) and tiny (16, top-4) at several buckets, random logits with planted ties, poisoned outputs,
// compared against host::router_top_k and the host's grouping; timed against a device copy measured in
// the same run. Exit 1 on a mismatch.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "check_support.h"
#include "route_check.h"
#include "kernels/cuda/moe_dispatch.cuh"
#include "kernels/cuda/router.cuh"
#include "kernels/host/moe.h"

using namespace rocket;
using check::DeviceBuffer;

namespace {

// Expert ids must match exactly (selection is by probability with ties to the lower index on both
// sides; the planted ties exercise that). Weights: e = exp(l - max) differs by up to 2 ulp (device
// expf), and the renormalised weight e·inv / sum_k(e·inv) adds k + 3 roundings; 2·(k + 5) unit
// roundoffs relative covers both.
template <int kExperts, int kTopK>
std::vector<float> planted_logits(int B, std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> logits(size_t(B) * kExperts);
  for (auto& l : logits) l = n(rng);
  for (int i = 0; i < B; ++i) {  // a tie inside the top-k and one at its edge
    float* l = logits.data() + size_t(i) * kExperts;
    l[(i * 7 + 3) % kExperts] = l[(i * 7 + 1) % kExperts] = 9.0f + 0.01f * i;
    l[(i * 5 + 2) % kExperts] = l[(i * 5 + 4) % kExperts] = 3.5f;
  }
  return logits;
}

// Choices and weights against host::router_top_k; returns the worst relative weight error, and sets
// ok to false (printing the first mismatch) unless every id matches and every weight is within tol.
template <int kExperts, int kTopK>
double compare_choices(const std::vector<float>& logits, int B, const std::vector<int32_t>& idx, const std::vector<float>& w,
                       bool& ok) {
  const double tol = 2.0 * (kTopK + 5) * 5.96e-8;
  double worst = 0;
  for (int i = 0; i < B; ++i) {
    int ref_idx[kTopK];
    float ref_w[kTopK];
    host::router_top_k(logits.data() + size_t(i) * kExperts, kExperts, kTopK, ref_idx, ref_w);
    for (int r = 0; r < kTopK; ++r) {
      const size_t at = size_t(i) * kTopK + r;
      const double rel = std::fabs(double(w[at]) - ref_w[r]) / ref_w[r];
      worst = std::max(worst, std::isnan(rel) ? INFINITY : rel);
      if ((idx[at] != ref_idx[r] || !(rel <= tol)) && ok) {
        ok = false;
        std::printf("  first mismatch at row %d rank %d: gpu expert %d weight %.8g, host expert %d weight %.8g\n", i, r,
                    idx[at], w[at], ref_idx[r], ref_w[r]);
      }
    }
  }
  return worst;
}

template <int kExperts, int kTopK, int B>
bool run(const char* name, double copy, std::mt19937& rng) {
  const std::vector<float> logits = planted_logits<kExperts, kTopK>(B, rng);
  DeviceBuffer<float> dl(logits), dw(size_t(B) * kTopK);
  DeviceBuffer<int32_t> di(size_t(B) * kTopK);
  rocket::cuda::RouterParams p{.logits = dl.ptr, .idx = di.ptr, .weight = dw.ptr};
  rocket::cuda::router<kExperts, kTopK>(p, B, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  bool ok = true;
  const double worst = compare_choices<kExperts, kTopK>(logits, B, di.download(), dw.download(), ok);
  const double us = check::time_us([&] { rocket::cuda::router<kExperts, kTopK>(p, B, nullptr); });
  check::report(name, B, us, double(B) * (kExperts * 4 + kTopK * 8), copy, worst, ok);
  return ok;
}

// moe_route: the choices as above, and the route equal to the host's grouping of them (experts
// ascending, rows ascending within an expert); run twice, the second time over the first's outputs,
// and both must agree bit for bit.
template <int kExperts, int kTopK, int B>
bool run_route(const char* name, double copy, std::mt19937& rng) {
  using D = rocket::cuda::MoeShape<64, 64, 64, kExperts, kTopK>;  // only experts and top-k matter here
  using Route = rocket::cuda::MoeRoute<D, B>;
  constexpr int kSlots = B * kTopK;
  const std::vector<float> logits = planted_logits<kExperts, kTopK>(B, rng);
  DeviceBuffer<float> dl(logits), dw(kSlots);
  DeviceBuffer<int32_t> di(kSlots);
  DeviceBuffer<uint8_t> dr(sizeof(Route));
  const rocket::cuda::MoeRouteParams<D, B> p{
      .logits = dl.ptr, .idx = di.ptr, .weight = dw.ptr, .route = reinterpret_cast<Route*>(dr.ptr)};
  rocket::cuda::moe_route<D, B>(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<int32_t> idx = di.download();
  const std::vector<float> w = dw.download();
  const std::vector<uint8_t> route_bytes = dr.download();
  Route r;
  std::memcpy(&r, route_bytes.data(), sizeof(Route));
  bool ok = true;
  const double worst = compare_choices<kExperts, kTopK>(logits, B, idx, w, ok);

  // The host's grouping of the host's choices (equal to the GPU's when the check above passed).
  std::vector<int> ref_idx(kSlots);
  std::vector<float> ref_w(kSlots);
  for (int i = 0; i < B; ++i)
    host::router_top_k(logits.data() + size_t(i) * kExperts, kExperts, kTopK, ref_idx.data() + i * kTopK, ref_w.data() + i * kTopK);
  const bool route_ok = check::route_matches_host(r, ref_idx, kExperts, kTopK);

  rocket::cuda::moe_route<D, B>(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const bool same = di.download() == idx && dw.download() == w && dr.download() == route_bytes;
  if (!same) std::printf("  a second launch wrote different bytes\n");
  ok &= route_ok && same;
  const double us = check::time_us([&] { rocket::cuda::moe_route<D, B>(p, nullptr); });
  check::report(name, B, us, double(B) * (kExperts * 4 + kTopK * 8) + sizeof(Route), copy, worst, ok);
  return ok;
}

}  // namespace

int main() {
  try {
    const double copy = check::device_copy_gbps();
    std::printf("device copy (read+write): %.0f GB/s; %% column = achieved / copy; worst = relative weight error\n", copy);
    std::mt19937 rng(3);
    bool ok = true;
    ok &= run<256, 8, 1>("router a3b 256 experts top-8", copy, rng);
    ok &= run<256, 8, 8>("router a3b 256 experts top-8", copy, rng);
    ok &= run<256, 8, 32>("router a3b 256 experts top-8", copy, rng);
    ok &= run<16, 4, 1>("router tiny 16 experts top-4", copy, rng);
    ok &= run<16, 4, 32>("router tiny 16 experts top-4", copy, rng);
    ok &= run_route<256, 8, 1>("moe_route a3b (one kernel)", copy, rng);
    ok &= run_route<256, 8, 8>("moe_route a3b (one kernel)", copy, rng);
    ok &= run_route<256, 8, 16>("moe_route a3b (router + dispatch)", copy, rng);
    ok &= run_route<256, 8, 32>("moe_route a3b (router + dispatch)", copy, rng);
    ok &= run_route<16, 4, 1>("moe_route tiny (one kernel)", copy, rng);
    ok &= run_route<16, 4, 2>("moe_route tiny (one kernel)", copy, rng);
    ok &= run_route<16, 4, 8>("moe_route tiny (one kernel)", copy, rng);
    ok &= run_route<16, 4, 32>("moe_route tiny (router + dispatch)", copy, rng);
    std::printf("router check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "router_check: %s\n", e.what());
    return 1;
  }
}
