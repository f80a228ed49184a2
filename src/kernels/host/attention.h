// Rotary position embedding and single-token (decode) attention, FP32, matching HF qwen3_5_moe.
#pragma once

#include <array>
#include <cstdint>

namespace rocket::host {

// A token's multimodal rotary position (time, height, width). A text token holds the same value on all
// three; an image token its frame, row and column offset by where its image starts (vision/mrope_positions.h).
struct MropePosition {
  int64_t t = 0, h = 0, w = 0;
  static MropePosition text(int64_t pos) { return {pos, pos, pos}; }
  bool operator==(const MropePosition&) const = default;
};

// `rope_parameters.mrope_section` of the text config: how many of the rotary_dim/2 frequencies each
// axis takes. The reference (Qwen3_5MoeTextRotaryEmbedding.recomposition_frequencies) interleaves them:
// frequency i reads the height position when i % 3 == 1 and i < 3·section[1], the width position when
// i % 3 == 2 and i < 3·section[2], and the time position otherwise (section[0] is implied). It does so
// whatever `mrope_interleaved` says. [11, 11, 10] is its default and the published configs' value.
using MropeSection = std::array<int, 3>;
inline constexpr MropeSection kMropeSection{11, 11, 10};

// Partial "rotate_half" RoPE in place on x [heads][head_dim] at position pos. Only the first
// rotary_dim dims of each head rotate; with h = rotary_dim/2, pair (i, i+h) rotates by
// angle_i = float(pos) * inv_freq_i, inv_freq_i = 1 / theta^(2i/rotary_dim), both computed in fp32
// as torch computes them. REQUIRES: rotary_dim even, rotary_dim <= head_dim.
// The same as apply_mrope at MropePosition::text(pos): the same bits, whatever the section.
void apply_rope(float* x, int heads, int head_dim, int rotary_dim, int64_t pos, double theta);

// The multimodal form: frequency i's angle is float(p_i) · inv_freq_i with p_i the axis MropeSection
// assigns it; the rotation and every rounding are apply_rope's. REQUIRES: as apply_rope; section >= 0.
void apply_mrope(float* x, int heads, int head_dim, int rotary_dim, const MropePosition& pos, double theta,
                 const MropeSection& section = kMropeSection);

// The rotation both rotary forms apply ("rotate_half"), in place on x [heads][head_dim]: dim i < half
// rotates with dim i + half by the angle whose cosine and sine are cos_t[i], sin_t[i].
// REQUIRES: 2 · half <= head_dim.
void rotate_half_pairs(float* x, int heads, int head_dim, int half, const float* cos_t, const float* sin_t);

// softmax(q kᵀ / sqrt(hd)) v over T cached positions for one token (the cache already holds this
// token's k and v). GQA: query head h reads kv head h / (heads/kv_heads).
// q [heads][hd]; k_cache, v_cache [T][kv_heads][hd]; out [heads][hd]. REQUIRES: T >= 1,
// heads % kv_heads == 0; out does not alias q.
void attention_decode(const float* q, const float* k_cache, const float* v_cache, int T, int heads,
                      int kv_heads, int hd, float* out);

// The same over a paged cache: position t's rows sit at row t % page_tokens of k_pages[t / page_tokens]
// and v_pages[t / page_tokens] (each page [page_tokens][kv_heads][hd]). Same bits as the contiguous
// form for the same rows. REQUIRES: as attention_decode; ceil(T / page_tokens) pages given.
void attention_decode_paged(const float* q, const float* const* k_pages, const float* const* v_pages,
                            int page_tokens, int T, int heads, int kv_heads, int hd, float* out);

}  // namespace rocket::host
