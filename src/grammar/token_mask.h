// The sampler's "adjust logits" step for a grammar: tokens outside a row's allowed-token bitmask
// (Matcher::fill_mask's layout, bit t of word t / 32) get -inf, so every sampler (greedy, top-k,
// top-p) can only pick an allowed one.
#pragma once

#include <cstdint>

namespace rocket::grammar {

// REQUIRES: `mask` holds (n + 31) / 32 words with at least one allowed token below n.
void mask_logits(const uint32_t* mask, float* logits, int n);

}  // namespace rocket::grammar
