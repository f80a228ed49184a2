// Rotary position embedding and single-token (decode) attention, FP32, matching HF qwen3_5_moe.
#pragma once

#include <cstdint>

namespace rocket::host {

// Partial "rotate_half" RoPE in place on x [heads][head_dim] at position pos. Only the first
// rotary_dim dims of each head rotate; with h = rotary_dim/2, pair (i, i+h) rotates by
// angle_i = float(pos) * inv_freq_i, inv_freq_i = 1 / theta^(2i/rotary_dim), both computed in fp32
// as torch computes them. REQUIRES: rotary_dim even, rotary_dim <= head_dim.
void apply_rope(float* x, int heads, int head_dim, int rotary_dim, int64_t pos, double theta);

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
