// PatchCache (vision/patch_cache.h): the preprocessed patches of images seen before, by digest, bounded
// in bytes, least recently used out first; and the prompt builder taking a resent image's patches from
// it instead of decoding the bytes again.
#include "vision/patch_cache.h"

#include <gtest/gtest.h>

#include "image_fixtures.h"
#include "openai/image_input.h"
#include "openai/prompt_builder.h"

namespace rocket {
namespace {

ImageDigest digest(uint8_t tag) {
  ImageDigest d;
  d.bytes.fill(tag);
  return d;
}

PixelPatches patches(size_t floats, float value) {
  PixelPatches p;
  p.grid_t = 1;
  p.grid_h = 2;
  p.grid_w = 2;
  p.values.assign(floats, value);
  p.vision_tokens = 1;
  return p;
}

TEST(PatchCache, FindsWhatItKeptByDigest) {
  PatchCache c(1 << 20);
  EXPECT_FALSE(c.find(digest(1)));
  c.insert(digest(1), patches(16, 1.5f));
  const std::optional<PixelPatches> got = c.find(digest(1));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->values, std::vector<float>(16, 1.5f));
  EXPECT_EQ(got->grid_h, 2);
  EXPECT_FALSE(c.find(digest(2)));
  EXPECT_EQ(c.bytes(), 16 * sizeof(float));
}

TEST(PatchCache, EvictsTheLeastRecentlyUsedToStayInItsBytes) {
  PatchCache c(3 * 100 * sizeof(float));
  c.insert(digest(1), patches(100, 1));
  c.insert(digest(2), patches(100, 2));
  c.insert(digest(3), patches(100, 3));
  ASSERT_TRUE(c.find(digest(1)));  // 1 is now the most recently used, 2 the least
  c.insert(digest(4), patches(100, 4));
  EXPECT_FALSE(c.find(digest(2)));
  EXPECT_TRUE(c.find(digest(1)));
  EXPECT_TRUE(c.find(digest(3)));
  EXPECT_TRUE(c.find(digest(4)));
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.bytes(), 3 * 100 * sizeof(float));
  // Larger than the whole bound: not kept, nothing else lost.
  c.insert(digest(5), patches(400, 5));
  EXPECT_FALSE(c.find(digest(5)));
  EXPECT_EQ(c.size(), 3u);
  // The same digest again replaces its entry, counted once.
  c.insert(digest(4), patches(50, 6));
  EXPECT_EQ(c.find(digest(4))->values.size(), 50u);
  EXPECT_EQ(c.bytes(), 250 * sizeof(float));
}

// A resent image takes the patches kept for its bytes' digest without being decoded: bytes that are
// no image at all expand with the kept patches when the cache holds their digest, and are refused
// (400, as ever) when it does not.
TEST(PatchCache, AResentImageIsNotDecodedAgain) {
  const std::vector<uint8_t> bytes{'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'};
  const ImageInput input{.media_type = "image/png", .bytes = bytes, .param = "messages[0].content[1]"};
  const int32_t pad = 151655;
  PatchCache seen(1 << 20);
  ImageRules rules{.seen = &seen};
  std::vector<int32_t> ids{1, pad, 2};
  EXPECT_THROW(expand_image_pads(ids, pad, {input}, rules), ProtocolError);
  seen.insert(hash_image_bytes(bytes), patches(4 * 1536, 0.25f));
  ids = {1, pad, 2};
  const std::vector<PromptImage> out = expand_image_pads(ids, pad, {input}, rules);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].pixels.values, std::vector<float>(4 * 1536, 0.25f));
  EXPECT_EQ(out[0].digest, hash_image_bytes(bytes));
  EXPECT_EQ(ids, (std::vector<int32_t>{1, pad, 2}));  // the kept patches' one merged token
}

// A real image: the first expansion decodes it and keeps its patches; the second takes them, equal.
TEST(PatchCache, KeepsWhatTheFirstExpansionPreprocessed) {
  const ImageInput input{.media_type = "image/png", .bytes = test::encode_png(test::pattern_image(300, 200, 5)),
                         .param = "messages[0].content[0]"};
  const int32_t pad = 151655;
  PatchCache seen(size_t(64) << 20);
  const ImageRules rules{.seen = &seen};
  std::vector<int32_t> first_ids{pad}, second_ids{pad};
  const std::vector<PromptImage> first = expand_image_pads(first_ids, pad, {input}, rules);
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen.bytes(), first[0].pixels.values.size() * sizeof(float));
  const std::vector<PromptImage> second = expand_image_pads(second_ids, pad, {input}, rules);
  EXPECT_EQ(second[0].pixels.values, first[0].pixels.values);
  EXPECT_EQ(second[0].pixels.vision_tokens, first[0].pixels.vision_tokens);
  EXPECT_EQ(second_ids, first_ids);
}

}  // namespace
}  // namespace rocket
