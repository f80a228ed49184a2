#include "kernels/host/gdn_chunked.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/host/rms_norm.h"

namespace rocket::host {
namespace {

constexpr int C = kGdnChunkTokens;

// Below this much state per chunk the heads run on the calling thread: a fork/join would cost more.
constexpr int64_t kGdnChunkedParallelMin = int64_t(1) << 16;

// One value head over one chunk of L tokens (local rows 0..L-1 of the piece's tokens s..s+L-1).
struct ChunkHead {
  int Kd, Vd;
  std::vector<float> qn, kn, a, x, up;  // [L][Kd], [L][Kd], [L][L], [L][Kd + Vd], [L][Vd]
  std::vector<double> gc;               // [L]

  ChunkHead(int kd, int vd)
      : Kd(kd), Vd(vd), qn(size_t(C) * kd), kn(size_t(C) * kd), a(size_t(C) * C), x(size_t(C) * (kd + vd)),
        up(size_t(C) * vd), gc(C) {}

  float dot_k(const float* u, int i) const {
    float s = 0.0f;
    for (int m = 0; m < Kd; ++m) s += u[m] * kn[size_t(i) * Kd + m];
    return s;
  }

  // S: this head's state [Kd][Vd]; out_h(t): token t's output row of this head.
  template <class Row>
  void run(float* S, const float* q, const float* k, const float* v, const float* g, const float* beta, int s,
           int L, int Hk, int Hv, int h, Row out_h) {
    const int kh = h / (Hv / Hk);
    const float q_scale = float(1.0 / std::sqrt(double(Kd)));  // as host::gdn_step
    double cum = 0.0;
    for (int t = 0; t < L; ++t) {
      const int64_t tok = s + t;
      float* qt = qn.data() + size_t(t) * Kd;
      float* kt = kn.data() + size_t(t) * Kd;
      std::copy_n(q + (tok * Hk + kh) * Kd, Kd, qt);
      std::copy_n(k + (tok * Hk + kh) * Kd, Kd, kt);
      l2_normalize(qt, Kd);
      l2_normalize(kt, Kd);
      for (int m = 0; m < Kd; ++m) qt[m] *= q_scale;
      cum += double(g[tok * Hv + h]);
      gc[t] = cum;
    }
    const auto ratio = [&](int t, int i) { return std::exp(float(gc[t] - gc[i])); };  // G_t / G_i

    // A (strictly lower) and the right-hand sides diag(beta) [G ⊙ K | V].
    const int X = Kd + Vd;
    for (int t = 0; t < L; ++t) {
      const int64_t tok = s + t;
      const float b = beta[tok * Hv + h], G = std::exp(float(gc[t]));
      for (int i = 0; i < t; ++i) a[size_t(t) * C + i] = b * dot_k(kn.data() + size_t(t) * Kd, i) * ratio(t, i);
      float* xt = x.data() + size_t(t) * X;
      for (int m = 0; m < Kd; ++m) xt[m] = b * G * kn[size_t(t) * Kd + m];
      for (int j = 0; j < Vd; ++j) xt[Kd + j] = b * v[(tok * Hv + h) * Vd + j];
    }
    // (I + A) [W | U] = rhs by forward substitution.
    for (int t = 1; t < L; ++t) {
      float* xt = x.data() + size_t(t) * X;
      for (int i = 0; i < t; ++i) {
        const float ati = a[size_t(t) * C + i];
        const float* xi = x.data() + size_t(i) * X;
        for (int c = 0; c < X; ++c) xt[c] -= ati * xi[c];
      }
    }
    // U' = U - W S0: the deltas.
    for (int t = 0; t < L; ++t) {
      const float* xt = x.data() + size_t(t) * X;
      float* ut = up.data() + size_t(t) * Vd;
      for (int j = 0; j < Vd; ++j) ut[j] = xt[Kd + j];
      for (int m = 0; m < Kd; ++m) {
        const float w = xt[m];
        const float* row = S + size_t(m) * Vd;
        for (int j = 0; j < Vd; ++j) ut[j] -= w * row[j];
      }
    }
    // O = (G ⊙ Q) S0 + tril_incl(Q Kᵀ ⊙ G_t/G_i) U'.
    for (int t = 0; t < L; ++t) {
      float* o = out_h(s + t);
      const float* qt = qn.data() + size_t(t) * Kd;
      const float G = std::exp(float(gc[t]));
      for (int j = 0; j < Vd; ++j) o[j] = 0.0f;
      for (int m = 0; m < Kd; ++m) {
        const float w = qt[m] * G;
        const float* row = S + size_t(m) * Vd;
        for (int j = 0; j < Vd; ++j) o[j] += w * row[j];
      }
      for (int i = 0; i <= t; ++i) {
        const float p = dot_k(qt, i) * ratio(t, i);
        const float* ui = up.data() + size_t(i) * Vd;
        for (int j = 0; j < Vd; ++j) o[j] += p * ui[j];
      }
    }
    // S_end = G_C S0 + (K ⊙ G_C/G)ᵀ U'.
    const float gC = std::exp(float(gc[L - 1]));
    for (int m = 0; m < Kd; ++m) {
      float* row = S + size_t(m) * Vd;
      for (int j = 0; j < Vd; ++j) row[j] *= gC;
      for (int i = 0; i < L; ++i) {
        const float w = kn[size_t(i) * Kd + m] * ratio(L - 1, i);
        const float* ui = up.data() + size_t(i) * Vd;
        for (int j = 0; j < Vd; ++j) row[j] += w * ui[j];
      }
    }
  }
};

}  // namespace

void gdn_chunked(float* state, const float* q, const float* k, const float* v, const float* g, const float* beta,
                 int n, int pos0, int Hk, int Hv, int Kd, int Vd, float* out, const GdnChunkState& on_chunk_end) {
  CHECK(n >= 1 && pos0 >= 0, "gdn_chunked: needs at least one token at a position >= 0");
  CHECK(Hk > 0 && Hv % Hk == 0, "GDN value heads must be a multiple of key heads");
  for (int s = 0; s < n;) {
    const int e = std::min(n, s + C - (pos0 + s) % C);  // the chunk ends at the next multiple of C
#pragma omp parallel for schedule(static) if (int64_t(Hv) * Kd * Vd >= kGdnChunkedParallelMin)
    for (int h = 0; h < Hv; ++h) {
      thread_local std::vector<ChunkHead> scratch;
      if (scratch.empty() || scratch[0].Kd != Kd || scratch[0].Vd != Vd) scratch.assign(1, ChunkHead(Kd, Vd));
      scratch[0].run(state + int64_t(h) * Kd * Vd, q, k, v, g, beta, s, e - s, Hk, Hv, h,
                     [&](int64_t tok) { return out + (tok * Hv + h) * Vd; });
    }
    if ((pos0 + e) % C == 0 && on_chunk_end) on_chunk_end(pos0 + e, state);
    s = e;
  }
}

}  // namespace rocket::host
