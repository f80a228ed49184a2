#include "kernels/host/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace rocket::host {
namespace {

// Below this many multiply-adds the heads run on the calling thread.
constexpr int64_t kAttentionParallelMin = int64_t(1) << 15;

}  // namespace

void apply_rope(float* x, int heads, int head_dim, int rotary_dim, int64_t pos, double theta) {
  apply_mrope(x, heads, head_dim, rotary_dim, MropePosition::text(pos), theta);
}

void apply_mrope(float* x, int heads, int head_dim, int rotary_dim, const MropePosition& pos, double theta,
                 const MropeSection& section) {
  CHECK(rotary_dim % 2 == 0 && rotary_dim <= head_dim, "rotary_dim must be even and <= head_dim");
  CHECK(section[0] >= 0 && section[1] >= 0 && section[2] >= 0, "mrope_section must not be negative");
  const int half = rotary_dim / 2;
  thread_local std::vector<float> cs;
  if (cs.size() < size_t(rotary_dim)) cs.resize(size_t(rotary_dim));
  float* cos_t = cs.data();
  float* sin_t = cos_t + half;
  // torch: inv_freq = 1.0 / (base ** (arange(0, dim, 2, float32) / dim)), then freqs = inv_freq * pos
  // in fp32 (each axis's positions times inv_freq, then the interleaved pick). Reproducing those
  // roundings keeps long-position angles on the oracle's values.
  const float base = float(theta);
  const float axis_pos[3] = {float(pos.t), float(pos.h), float(pos.w)};
  for (int i = 0; i < half; ++i) {
    const int axis = (i % 3 == 1 && i < 3 * section[1]) ? 1 : (i % 3 == 2 && i < 3 * section[2]) ? 2 : 0;
    const float exponent = float(2 * i) / float(rotary_dim);
    const float inv_freq = 1.0f / std::pow(base, exponent);
    const float angle = axis_pos[axis] * inv_freq;
    cos_t[i] = std::cos(angle);
    sin_t[i] = std::sin(angle);
  }
  rotate_half_pairs(x, heads, head_dim, half, cos_t, sin_t);
}

void rotate_half_pairs(float* x, int heads, int head_dim, int half, const float* cos_t, const float* sin_t) {
  for (int hh = 0; hh < heads; ++hh) {
    float* v = x + int64_t(hh) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos_t[i] - b * sin_t[i];
      v[i + half] = b * cos_t[i] + a * sin_t[i];
    }
  }
}

namespace {

// The one decode-attention loop; k_row(t) and v_row(t) point at position t's rows ([kv_heads][hd]).
// Contiguous and paged caches share it, so both give the same bits for the same rows.
template <typename KRow, typename VRow>
void attend(const float* q, KRow k_row, VRow v_row, int T, int heads, int kv_heads, int hd, float* out) {
  CHECK(T >= 1 && kv_heads > 0 && heads % kv_heads == 0, "attention needs T >= 1 and heads % kv_heads == 0");
  const int group = heads / kv_heads;
  // HF: scaling = head_dim ** -0.5 (Python double), applied to fp32 scores as an fp32 scalar.
  const float scale = float(std::pow(double(hd), -0.5));
#pragma omp parallel for schedule(static) if (int64_t(heads) * T * hd >= kAttentionParallelMin)
  for (int h = 0; h < heads; ++h) {
    thread_local std::vector<float> scores;
    if (scores.size() < size_t(T)) scores.resize(size_t(T));
    const float* qh = q + int64_t(h) * hd;
    const int64_t kv_off = int64_t(h / group) * hd;
    float mx = -INFINITY;
    for (int t = 0; t < T; ++t) {
      const float* kt = k_row(t) + kv_off;
      constexpr int kLanes = 8;
      float a[kLanes] = {};
      int d = 0;
      for (; d + kLanes <= hd; d += kLanes)
        for (int l = 0; l < kLanes; ++l) a[l] += qh[d + l] * kt[d + l];
      float s = 0;
      for (int l = 0; l < kLanes; ++l) s += a[l];
      for (; d < hd; ++d) s += qh[d] * kt[d];
      scores[t] = s * scale;
      mx = std::max(mx, scores[t]);
    }
    float sum = 0;
    for (int t = 0; t < T; ++t) {
      scores[t] = std::exp(scores[t] - mx);
      sum += scores[t];
    }
    const float inv = 1.0f / sum;
    float* oh = out + int64_t(h) * hd;
    for (int d = 0; d < hd; ++d) oh[d] = 0.0f;
    for (int t = 0; t < T; ++t) {
      const float p = scores[t] * inv;
      const float* vt = v_row(t) + kv_off;
      for (int d = 0; d < hd; ++d) oh[d] += p * vt[d];
    }
  }
}

}  // namespace

void attention_decode(const float* q, const float* k_cache, const float* v_cache, int T, int heads,
                      int kv_heads, int hd, float* out) {
  const int64_t stride = int64_t(kv_heads) * hd;  // between consecutive positions in the cache
  attend(q, [=](int t) { return k_cache + t * stride; }, [=](int t) { return v_cache + t * stride; }, T, heads,
         kv_heads, hd, out);
}

void attention_decode_paged(const float* q, const float* const* k_pages, const float* const* v_pages,
                            int page_tokens, int T, int heads, int kv_heads, int hd, float* out) {
  const int64_t stride = int64_t(kv_heads) * hd;
  attend(q, [=](int t) { return k_pages[t / page_tokens] + (t % page_tokens) * stride; },
         [=](int t) { return v_pages[t / page_tokens] + (t % page_tokens) * stride; }, T, heads, kv_heads, hd, out);
}

}  // namespace rocket::host
