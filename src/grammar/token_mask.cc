#include "grammar/token_mask.h"

#include <limits>

namespace rocket::grammar {

void mask_logits(const uint32_t* mask, float* logits, int n) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  for (int w = 0; w * 32 < n; ++w) {
    const uint32_t bits = mask[w];
    if (bits == ~0u) continue;
    const int end = w * 32 + 32 < n ? w * 32 + 32 : n;
    for (int t = w * 32; t < end; ++t)
      if (!(bits >> (t - w * 32) & 1u)) logits[t] = kNone;
  }
}

}  // namespace rocket::grammar
