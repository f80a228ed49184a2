#include "cache/prompt_key.h"

#include <algorithm>

#include "core/error.h"

namespace rocket {

int32_t image_key_token(const ImageDigest& digest, int64_t i) {
  const size_t w = size_t(i % PromptKey::kDigestTokens) * 4;
  const uint32_t word = uint32_t(digest.bytes[w]) << 24 | uint32_t(digest.bytes[w + 1]) << 16 |
                        uint32_t(digest.bytes[w + 2]) << 8 | uint32_t(digest.bytes[w + 3]);
  // Past the first 8 tokens the words repeat, mixed with the round (Fibonacci hashing's constant), so
  // a round does not repeat the first 8 keys. (Distinct keys are not what exactness rests on: a
  // prefix's key fixes where each image starts, so each token's index in its image.)
  const uint32_t mixed = word ^ (uint32_t(i / PromptKey::kDigestTokens) * 0x9E3779B9u);
  // The top bit set: a negative int32, never a vocabulary id.
  return int32_t(0x80000000u | (mixed & 0x7fffffffu));
}

PromptKey PromptKey::of_text(std::span<const int32_t> ids) {
  PromptKey k;
  k.tokens.assign(ids.begin(), ids.end());
  return k;
}

PromptKey PromptKey::of(std::span<const int32_t> ids, std::span<const KeyedImage> images) {
  PromptKey k = of_text(ids);
  int64_t end = 0;
  for (const KeyedImage& im : images) {
    CHECK(im.tokens >= 1 && im.first_token >= end && im.first_token + im.tokens <= int64_t(ids.size()),
          "prompt key: an image's tokens outside the prompt, or out of order");
    const int32_t pad = ids[size_t(im.first_token)];
    for (int64_t i = 0; i < im.tokens; ++i) {
      CHECK(ids[size_t(im.first_token + i)] == pad, "prompt key: an image's run holds another token");
      k.tokens[size_t(im.first_token + i)] = image_key_token(im.digest, i);
    }
    const int64_t weak = std::min<int64_t>(im.tokens, kDigestTokens);
    k.unheld.push_back({.after = int(im.first_token), .below = int(im.first_token + weak)});
    end = im.first_token + im.tokens;
  }
  return k;
}

bool PromptKey::holds(int boundary) const {
  for (const Unheld& u : unheld)
    if (boundary > u.after && boundary < u.below) return false;
  return true;
}

int PromptKey::held_page_at_or_before(int boundary, int page) const {
  CHECK(page > 0 && boundary >= 0);
  int b = boundary / page * page;
  // An unheld boundary steps back to below its range's start; ranges are few (one per image).
  while (!holds(b)) {
    auto u = std::find_if(unheld.begin(), unheld.end(), [&](const Unheld& r) { return b > r.after && b < r.below; });
    b = u->after / page * page;
  }
  return b;
}

}  // namespace rocket
