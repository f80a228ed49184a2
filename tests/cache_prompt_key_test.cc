// The prefix cache's key of a prompt (cache/prompt_key.h): text ids unchanged, an image's tokens
// keyed by its digest (the same image the same key, another image another key at every token),
// never a vocabulary id, the boundaries held; and through the real RadixCache + StreamPages, a prompt
// that resends an image resumes past it while another image at the same place resumes no further
// than its first image token.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "cache/prompt_key.h"
#include "cache/stream_pages.h"

#include "cache_fixtures.h"

namespace rocket {
namespace {

using test::kP;
using test::small_geometry;

constexpr int32_t kPad = 248056;  // Qwen's <|image_pad|>
constexpr int32_t kVocab = 248320;

ImageDigest digest_of(const std::string& bytes) {
  return hash_image_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

// `before` text ids, an image's `n` pads, `after` text ids.
std::vector<int32_t> prompt(int before, int n, int after) {
  std::vector<int32_t> ids;
  for (int i = 0; i < before; ++i) ids.push_back(100 + i);
  ids.insert(ids.end(), size_t(n), kPad);
  for (int i = 0; i < after; ++i) ids.push_back(5000 + i);
  return ids;
}

TEST(PromptKey, TextIdsAreTheirOwnKeyAndEveryBoundaryHolds) {
  const std::vector<int32_t> ids = prompt(10, 0, 7);
  for (const PromptKey& k : {PromptKey::of_text(ids), PromptKey::of(ids, {})}) {
    EXPECT_EQ(k.tokens, ids);
    for (int b = 0; b <= int(ids.size()); ++b) EXPECT_TRUE(k.holds(b)) << b;
  }
}

TEST(PromptKey, AnImageIsKeyedByItsDigestAndTheTextAroundItIsNot) {
  const std::vector<int32_t> ids = prompt(5, 40, 6);
  const KeyedImage a{.first_token = 5, .tokens = 40, .digest = digest_of("screenshot A")};
  const KeyedImage a_again{.first_token = 5, .tokens = 40, .digest = digest_of("screenshot A")};
  const KeyedImage b{.first_token = 5, .tokens = 40, .digest = digest_of("screenshot B")};
  const PromptKey ka = PromptKey::of(ids, std::span(&a, 1));
  const PromptKey ka2 = PromptKey::of(ids, std::span(&a_again, 1));
  const PromptKey kb = PromptKey::of(ids, std::span(&b, 1));
  EXPECT_EQ(ka.tokens, ka2.tokens);  // the same bytes, the same key
  ASSERT_EQ(ka.tokens.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool image = i >= 5 && i < 45;
    if (!image) {
      EXPECT_EQ(ka.tokens[i], ids[i]) << i;
      EXPECT_EQ(kb.tokens[i], ids[i]) << i;
    } else {
      EXPECT_NE(ka.tokens[i], kb.tokens[i]) << "another image, the same key at " << i;
      EXPECT_EQ(ka.tokens[i], image_key_token(a.digest, int64_t(i) - 5));
    }
  }
  // Past the digest's 8 words the keys repeat no earlier position's.
  std::set<int32_t> seen(ka.tokens.begin() + 5, ka.tokens.begin() + 13);
  for (size_t i = 13; i < 45; ++i) EXPECT_FALSE(seen.count(ka.tokens[i])) << i;
}

TEST(PromptKey, ImageKeysAreNeverVocabularyIds) {
  // Digests of all zeros and all ones (the word's extremes) and some real ones, over a long run.
  std::vector<ImageDigest> digests(2);
  digests[1].bytes.fill(0xff);
  for (int i = 0; i < 50; ++i) digests.push_back(digest_of("image " + std::to_string(i)));
  for (const ImageDigest& d : digests)
    for (int64_t i = 0; i < 2000; ++i) {
      const int32_t k = image_key_token(d, i);
      ASSERT_TRUE(k < 0 || k >= kVocab) << k;  // every id a tokenizer or engine uses is in [0, vocab)
    }
}

TEST(PromptKey, NoBoundaryInsideAnImagesFirstDigestTokensHolds) {
  // Two images: 40 tokens at [5, 45) and 4 tokens (fewer than the digest's 8) at [50, 54).
  std::vector<int32_t> ids = prompt(5, 40, 5);
  ids.insert(ids.end(), 4, kPad);
  ids.insert(ids.end(), {7, 8, 9});
  const KeyedImage images[] = {{.first_token = 5, .tokens = 40, .digest = digest_of("a")},
                               {.first_token = 50, .tokens = 4, .digest = digest_of("b")}};
  const PromptKey k = PromptKey::of(ids, images);
  for (int b = 0; b <= int(ids.size()); ++b) {
    const bool unheld = (b > 5 && b < 5 + PromptKey::kDigestTokens) || (b > 50 && b < 54);
    EXPECT_EQ(k.holds(b), !unheld) << b;
  }
  // Pages of 4: boundary 8 (3 tokens in) steps back to 4; 16 (11 in) holds; 52 steps back to 48.
  EXPECT_EQ(k.held_page_at_or_before(10, 4), 4);
  EXPECT_EQ(k.held_page_at_or_before(16, 4), 16);
  EXPECT_EQ(k.held_page_at_or_before(53, 4), 48);
  EXPECT_EQ(k.held_page_at_or_before(57, 4), 56);
  // Pages of 6: 12 (7 in) steps back below the image's start 5 to 0.
  EXPECT_EQ(k.held_page_at_or_before(12, 6), 0);
}

TEST(PromptKeyDeathTest, ImagesThatAreNotRunsOfTheirPromptAreAProgrammingError) {
  const std::vector<int32_t> ids = prompt(5, 10, 5);
  const ImageDigest d = digest_of("x");
  const KeyedImage past_text{.first_token = 5, .tokens = 11, .digest = d};  // its last token is text
  const KeyedImage outside{.first_token = 12, .tokens = 10, .digest = d};
  const KeyedImage overlapping[] = {{.first_token = 5, .tokens = 6, .digest = d}, {.first_token = 8, .tokens = 7, .digest = d}};
  EXPECT_DEATH(PromptKey::of(ids, std::span(&past_text, 1)), "another token");
  EXPECT_DEATH(PromptKey::of(ids, std::span(&outside, 1)), "outside the prompt");
  EXPECT_DEATH(PromptKey::of(ids, overlapping), "out of order");
}

// A stream computes the whole key, captures and publishes at every page boundary before its last
// token that the key holds (as the scheduler captures), and detaches.
void serve(RadixCache& cache, const PromptKey& k) {
  StreamPages s = StreamPages::resume(cache, k.tokens);
  ASSERT_TRUE(s.extend(std::span(k.tokens).subspan(size_t(s.length()))));
  for (int b = kP; b < s.length(); b += kP)
    if (b > s.captured_tokens() && k.holds(b)) {
      ASSERT_TRUE(s.capture_snapshot(b));
      s.publish();
    }
  s.detach();
}

TEST(PromptKey, TheCacheResumesPastAResentImageAndNotPastAnotherOne) {
  RadixCache cache(small_geometry(/*pages=*/64, /*snapshots=*/16, /*max_context=*/128));
  // 6 text tokens, a 30-token image at [6, 36), 20 text tokens: 56 tokens, pages of 4.
  const std::vector<int32_t> ids = prompt(6, 30, 20);
  const auto key = [&](const std::string& bytes) {
    const KeyedImage im{.first_token = 6, .tokens = 30, .digest = digest_of(bytes)};
    return PromptKey::of(ids, std::span(&im, 1));
  };
  serve(cache, key("A"));
  // The ids alone (what the cache was keyed by before) match nothing past the text: the tree holds
  // no page of raw image_pad ids.
  EXPECT_EQ(cache.cached_prefix(ids), 4);
  // The same image again resumes from the last page boundary before its last token.
  StreamPages again = StreamPages::resume(cache, key("A").tokens);
  EXPECT_EQ(again.length(), 52);
  again.release();
  // Another image at the same place resumes to the last page boundary before its first token (every
  // held boundary of A's was published).
  const PromptKey kb = key("B");
  StreamPages other = StreamPages::resume(cache, kb.tokens);
  EXPECT_EQ(other.length(), 4);
  EXPECT_EQ(cache.cached_prefix(kb.tokens), 4);
  other.release();
  cache.check_invariants();
}

}  // namespace
}  // namespace rocket
