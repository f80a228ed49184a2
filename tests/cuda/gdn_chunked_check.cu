// GPU check + benchmark for the chunked gated delta rule over a prefill piece
// (src/kernels/cuda/gdn_chunked.cuh) against the sequential recurrent kernel (gdn.cuh gdn_prefill,
// called on 32-token runs of each chunk): outputs, the final state and the snapshot states captured at
// chunk ends. a3b and tiny shapes, pieces of 1..2048 tokens starting on and off a chunk boundary,
// random data, nonzero initial state, poisoned outputs and snapshot slots (slots not captured must stay
// poisoned). Then the median time of a3b pieces of 512, 2048 and 4096 tokens. Exit 1 on a mismatch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "check_support.h"
#include "kernels/cuda/gdn.cuh"
#include "kernels/cuda/gdn_chunked.cuh"

using namespace rocket;
using check::DeviceBuffer;

namespace {

constexpr float kEps = 1e-6f;
constexpr double kUnit = 5.96e-8;  // fp32 unit roundoff
constexpr int C = tiling::kGdnChunk;
constexpr int kSeqChunk = 32;      // gdn_prefill's largest launch

const auto bf = [](auto* q) { return reinterpret_cast<__nv_bfloat16*>(q); };

struct Span {
  int start, count;
};
std::vector<Span> chunk_spans(int n, int pos0) {
  std::vector<Span> spans;
  for (int s = 0; s < n;) {
    const int e = std::min(n, s + C - (pos0 + s) % C);
    spans.push_back({s, e - s});
    s = e;
  }
  return spans;
}

template <class S>
struct Inputs {
  check::Bf16Data qkv, a, b, z, a_log, dt_bias, norm_w;
  std::vector<float> state;
  Inputs(int n, std::mt19937& rng)
      : qkv(check::random_bf16(size_t(n) * S::kConvDim, -1.0f, 1.0f, rng)),
        a(check::random_bf16(size_t(n) * S::kVHeads, -3.0f, 3.0f, rng)),
        b(check::random_bf16(size_t(n) * S::kVHeads, -3.0f, 3.0f, rng)),
        z(check::random_bf16(size_t(n) * S::kValueDim, -3.0f, 3.0f, rng)),
        a_log(check::random_bf16(S::kVHeads, -2.0f, 1.5f, rng)),  // decays from ~1 to ~1e-7 per token
        dt_bias(check::random_bf16(S::kVHeads, -1.0f, 1.0f, rng)),
        norm_w(check::random_bf16(S::kVDim, 0.5f, 1.5f, rng)),
        state(size_t(S::kVHeads) * S::kKDim * S::kVDim) {
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (auto& s : state) s = u(rng);
  }
};

// NOTE: the tolerance, as tests/gdn_chunked_test.cc (where the host forms agree to ~1e-6): one token's
// worst case (4 Kd + 16 roundings of the head's largest state entry) or n tokens' random walk of them,
// whichever is larger, with lambda = 4 (the device fuses multiply-adds and its expf may differ by 2 ulp).
double tolerance(int n, int Kd) {
  const double per_token = 4.0 * Kd + 16.0;
  return std::max(per_token, 4.0 * std::sqrt(double(n) * per_token)) * kUnit;
}

// max |got - want| / max |want| per value head over [Hv][Kd][Vd]; NaN is infinite.
double state_error(const std::vector<float>& got, const float* want, int Hv, int64_t per_head) {
  double worst = 0;
  for (int h = 0; h < Hv; ++h) {
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < per_head; ++i) {
      scale = std::max(scale, double(std::fabs(want[h * per_head + i])));
      const double d = std::fabs(double(got[h * per_head + i]) - want[h * per_head + i]);
      diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

template <class S>
bool run_case(const char* name, int n, int pos0, std::mt19937& rng) {
  const int64_t layer_floats = int64_t(S::kVHeads) * S::kKDim * S::kVDim;
  const Inputs<S> in(n, rng);
  const std::vector<Span> spans = chunk_spans(n, pos0);
  const int chunks = int(spans.size());

  // Snapshot slots: chunk j that ends on a multiple of C goes to a shuffled slot; one extra slot is
  // never named and must stay poisoned. Slots are 2 layers apart, this layer the second.
  const int slots = chunks + 1;
  const int64_t snapshot_stride = 2 * layer_floats;
  std::vector<int32_t> perm(slots), capture(chunks, -1);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int j = 0; j < chunks; ++j)
    if ((pos0 + spans[j].start + spans[j].count) % C == 0) capture[j] = perm[j];

  DeviceBuffer<uint16_t> dqkv(in.qkv.bits), da(in.a.bits), db(in.b.bits), dz(in.z.bits), dalog(in.a_log.bits),
      ddt(in.dt_bias.bits), dnw(in.norm_w.bits), dout(size_t(n) * S::kValueDim), dref(size_t(n) * S::kValueDim);
  DeviceBuffer<float> dstate(in.state), dseq(in.state), dsnap(size_t(slots) * snapshot_stride);
  DeviceBuffer<int32_t> dcapture(capture), dslot(std::vector<int32_t>{0});
  const int64_t ws_floats = tiling::gdn_chunked_workspace_floats(S::kKHeads, S::kVHeads, S::kKDim, S::kVDim, n);
  DeviceBuffer<float> dws{size_t(ws_floats)};

  const rocket::cuda::GdnChunkedParams p{.qkv = bf(dqkv.ptr), .a = bf(da.ptr), .b = bf(db.ptr), .z = bf(dz.ptr),
                                         .a_log = bf(dalog.ptr), .dt_bias = bf(ddt.ptr), .norm_w = bf(dnw.ptr),
                                         .state = dstate.ptr, .snapshot_state = dsnap.ptr + layer_floats,
                                         .snapshot_stride = snapshot_stride, .capture_at = dcapture.ptr,
                                         .workspace = dws.ptr, .workspace_floats = ws_floats, .out = bf(dout.ptr),
                                         .tokens = n, .pos0 = pos0, .eps = kEps};
  rocket::cuda::gdn_chunked<S>(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = check::bf16_to_f32(dout.download());
  const std::vector<float> state = dstate.download();
  const std::vector<float> snap = dsnap.download();

  // The sequential kernel, chunk by chunk in runs of <= 32 tokens, its state read at each chunk end.
  std::vector<std::vector<float>> seq_states(chunks);
  for (int j = 0; j < chunks; ++j) {
    for (int s = spans[j].start; s < spans[j].start + spans[j].count; s += kSeqChunk) {
      const int t = std::min(kSeqChunk, spans[j].start + spans[j].count - s);
      const rocket::cuda::GdnParams g{.qkv = bf(dqkv.ptr) + int64_t(s) * S::kConvDim, .a = bf(da.ptr) + int64_t(s) * S::kVHeads,
                                      .b = bf(db.ptr) + int64_t(s) * S::kVHeads, .z = bf(dz.ptr) + int64_t(s) * S::kValueDim,
                                      .a_log = bf(dalog.ptr), .dt_bias = bf(ddt.ptr), .norm_w = bf(dnw.ptr),
                                      .state = dseq.ptr, .slot_stride = 0, .slots = dslot.ptr,
                                      .out = bf(dref.ptr) + int64_t(s) * S::kValueDim, .tokens = t, .eps = kEps};
      rocket::cuda::gdn_prefill<S, kSeqChunk>(g, nullptr);
      // gdn_prefill reads its state before its dependent-launch wait (the engine never runs two of one
      // layer back to back), so each run must finish before the next starts.
      CUDA_CHECK(cudaDeviceSynchronize());
    }
    seq_states[j] = dseq.download();
  }
  const std::vector<float> ref = check::bf16_to_f32(dref.download());

  const double tol = tolerance(n, S::kKDim);
  const int64_t per_head = int64_t(S::kKDim) * S::kVDim;
  // Outputs, as gdn_check: o = Sᵀq (sum |q| <= 1) errs by tol of the head's largest state entry (taken
  // over the initial state and every chunk end), which the gated norm scales by |w silu(z)| / rms(o)
  // (rms from the chunked kernel's fp32 o, left in its workspace); then one bf16 ulp of rounding.
  const std::vector<float> ws = dws.download();
  const float* o = ws.data() + rocket::cuda::GdnChunkedShape<S>::output_offset(n);
  std::vector<float> smax(S::kVHeads, 0.0f);
  for (int h = 0; h < S::kVHeads; ++h) {
    for (int64_t i = 0; i < per_head; ++i) smax[h] = std::max(smax[h], std::fabs(in.state[h * per_head + i]));
    for (const auto& st : seq_states)
      for (int64_t i = 0; i < per_head; ++i) smax[h] = std::max(smax[h], std::fabs(st[h * per_head + i]));
  }
  double worst_ulps = 0, worst_rel = 0;
  long bad = -1;
  for (int64_t r = 0; r < int64_t(n) * S::kVHeads; ++r) {
    const int h = int(r % S::kVHeads);
    double ss = 0;
    for (int jv = 0; jv < S::kVDim; ++jv) ss += double(o[r * S::kVDim + jv]) * o[r * S::kVDim + jv];
    const double inv = 1.0 / std::sqrt(ss / S::kVDim + kEps);
    for (int jv = 0; jv < S::kVDim; ++jv) {
      const int64_t at = r * S::kVDim + jv;
      const double zj = in.z.f[at], gate = std::fabs(in.norm_w.f[jv] * zj / (1.0 + std::exp(-zj)));
      const double scale = smax[h] * gate * inv;
      const double ulps = check::bf16_error_ulps(out[at], ref[at], float(tol * scale));
      worst_ulps = std::max(worst_ulps, ulps);
      worst_rel = std::max(worst_rel, std::fabs(double(out[at]) - ref[at]) / scale);
      if (!(ulps <= 1.0) && bad < 0) bad = long(at);
    }
  }
  const double state_err = state_error(state, seq_states.back().data(), S::kVHeads, per_head);
  double snap_err = 0;
  long bad_snap = -1;
  for (int j = 0; j < chunks; ++j) {
    if (capture[j] < 0) continue;
    const std::vector<float> got(snap.begin() + capture[j] * snapshot_stride + layer_floats,
                                 snap.begin() + capture[j] * snapshot_stride + 2 * layer_floats);
    snap_err = std::max(snap_err, state_error(got, seq_states[j].data(), S::kVHeads, per_head));
  }
  // Everything of the snapshot buffer not captured keeps its poison (0xff bytes), bitwise.
  for (int sl = 0; sl < slots; ++sl) {
    const bool captured = std::find(capture.begin(), capture.end(), sl) != capture.end();
    for (int64_t i = 0; i < snapshot_stride && bad_snap < 0; ++i) {
      if (captured && i >= layer_floats) continue;
      uint32_t bits;
      std::memcpy(&bits, &snap[sl * snapshot_stride + i], 4);
      if (bits != 0xffffffffu) bad_snap = long(sl * snapshot_stride + i);
    }
  }
  const bool ok = bad < 0 && state_err <= tol && snap_err <= tol && bad_snap < 0;
  std::printf("%-6s n=%-5d pos0=%-3d chunks %-3d out: worst %.2e of its scale, %.2f bf16 ulps past tol | state %.2e | snapshots %.2e "
              "(%d) | tol %.2e  %s\n",
              name, n, pos0, chunks, worst_rel, worst_ulps, state_err, snap_err,
              int(std::count_if(capture.begin(), capture.end(), [](int32_t c) { return c >= 0; })), tol,
              ok ? "PASS" : "FAIL");
  if (bad >= 0)
    std::printf("  first output mismatch at token %ld head %ld col %ld: chunked %.7g sequential %.7g\n",
                bad / S::kValueDim, bad % S::kValueDim / S::kVDim, bad % S::kVDim, out[bad], ref[bad]);
  if (bad_snap >= 0) std::printf("  snapshot buffer written outside the captured slots' layer at float %ld\n", bad_snap);
  return ok;
}

// FLOPs of the chunked algorithm per piece (multiply-adds count 2): per (chunk, head) Q Kᵀ and K Kᵀ, the
// forward substitution over Kd + Vd columns, and the scan's U' = U - W S, O = Q S + P U', S += Kᵀ U'.
template <class S>
double piece_flops(int n) {
  const double chunks = std::ceil(double(n) / C), Kd = S::kKDim, Vd = S::kVDim, H = S::kVHeads;
  const double prepare = 2.0 * C * C * Kd * 2 + double(C) * C / 2 * (Kd + Vd) * 2;
  const double scan = (3.0 * C * Kd * Vd + double(C) * C / 2 * Vd) * 2;
  return chunks * H * (prepare + scan);
}

template <class S>
bool time_piece(int n, std::mt19937& rng) {
  const Inputs<S> in(n, rng);
  DeviceBuffer<uint16_t> dqkv(in.qkv.bits), da(in.a.bits), db(in.b.bits), dz(in.z.bits), dalog(in.a_log.bits),
      ddt(in.dt_bias.bits), dnw(in.norm_w.bits), dout(size_t(n) * S::kValueDim);
  DeviceBuffer<float> dstate(in.state);
  const int64_t ws_floats = tiling::gdn_chunked_workspace_floats(S::kKHeads, S::kVHeads, S::kKDim, S::kVDim, n);
  DeviceBuffer<float> dws{size_t(ws_floats)};
  const rocket::cuda::GdnChunkedParams p{.qkv = bf(dqkv.ptr), .a = bf(da.ptr), .b = bf(db.ptr), .z = bf(dz.ptr),
                                         .a_log = bf(dalog.ptr), .dt_bias = bf(ddt.ptr), .norm_w = bf(dnw.ptr),
                                         .state = dstate.ptr, .workspace = dws.ptr, .workspace_floats = ws_floats,
                                         .out = bf(dout.ptr), .tokens = n, .pos0 = 0, .eps = kEps};
  // Median of 21 runs, in seconds (the scan moves the state on each run, which changes no cost).
  const auto median_s = [&](void (*launch)(const rocket::cuda::GdnChunkedParams&, cudaStream_t)) {
    std::vector<float> ms;
    for (int i = 0; i < 21; ++i) ms.push_back(elapsed_ms(nullptr, [&] { launch(p, nullptr); }));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1e-3;
  };
  for (int i = 0; i < 3; ++i) rocket::cuda::gdn_chunked<S>(p, nullptr);
  const double t = median_s(&rocket::cuda::gdn_chunked<S>);
  const std::vector<float> out = check::bf16_to_f32(dout.download());
  const bool finite = std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); });
  // Bytes: inputs, output, the state in and out, and the workspace records written once and read by
  // every scan block of the head (the output area written and read once).
  const double records = std::ceil(double(n) / C) * S::kVHeads * double(tiling::gdn_chunk_floats(S::kKDim, S::kVDim)) * 4;
  const double bytes = double(n) * (S::kConvDim + 2 * S::kVHeads + 2 * S::kValueDim) * 2 +
                       2.0 * S::kVHeads * S::kKDim * S::kVDim * 4 + records * 2 + double(n) * S::kValueDim * 4 * 2;
  // Each kernel alone, after the whole.
  const double part[3] = {median_s(&rocket::cuda::gdn_chunk_prepare<S>) * 1e6, median_s(&rocket::cuda::gdn_chunk_scan<S>) * 1e6,
                          median_s(&rocket::cuda::gdn_chunk_norm<S>) * 1e6};
  std::printf("a3b    n=%-5d median %8.1f us  %7.2f M tokens/s  %6.2f TFLOP/s  %6.0f GB/s  (prepare %.1f scan %.1f norm %.1f us)  %s\n",
              n, t * 1e6, n / t / 1e6, piece_flops<S>(n) / t / 1e12, bytes / t / 1e9, part[0], part[1], part[2],
              finite ? "" : "NON-FINITE OUTPUT");
  return finite;
}

using A3b = rocket::cuda::GdnShape<16, 32, 128, 128>;
using Tiny = rocket::cuda::GdnShape<2, 4, 32, 32>;

}  // namespace

int main() {
  try {
    std::mt19937 rng(26);
    bool ok = true;
    for (int n : {1, 31, 64, 100, 2048})
      for (int pos0 : {0, 37}) {
        ok &= run_case<A3b>("a3b", n, pos0, rng);
        ok &= run_case<Tiny>("tiny", n, pos0, rng);
      }
    for (int n : {512, 2048, 4096}) ok &= time_piece<A3b>(n, rng);
    std::printf("gdn chunked check %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "gdn_chunked_check: %s\n", e.what());
    return 1;
  }
}
