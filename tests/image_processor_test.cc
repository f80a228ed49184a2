// vision/image_processor.h and image_resize.h: smart_resize against the reference formula worked by
// hand (Python's float division, round half to even), the patch order against indices derived
// independently from each pixel's coordinates, the fused normalisation's exact floats, the
// resampler against a double-precision evaluation of the same filter, and the content hash.
#include <gtest/gtest.h>

#include <cmath>

#include "image_fixtures.h"
#include "vision/image_error.h"
#include "vision/image_hash.h"
#include "vision/image_processor.h"
#include "vision/image_resize.h"

namespace rocket {
namespace {

ResizedSize qwen(int64_t height, int64_t width) { return smart_resize(height, width, 32, 65536, 16777216); }

void expect_size(ResizedSize got, int64_t height, int64_t width) {
  EXPECT_EQ(got.height, height);
  EXPECT_EQ(got.width, width);
}

TEST(SmartResize, RowsOfTheReferenceFormula) {
  // Already multiples of 32 within [256², 4096²]: unchanged.
  expect_size(qwen(1024, 1024), 1024, 1024);
  expect_size(qwen(4096, 4096), 4096, 4096);
  // 1080 / 32 = 33.75 → 34 → 1088; 1920 / 32 = 60.
  expect_size(qwen(1080, 1920), 1088, 1920);
  expect_size(qwen(720, 1280), 704, 1280);  // 22.5 → 22 (half to even)
  // Half to even on both sides: 1040 / 32 = 32.5 → 32, 1072 / 32 = 33.5 → 34 (C's round() gives 33).
  expect_size(qwen(1040, 1072), 1024, 1088);
  // 4097 rounds to 4096 on each side, exactly max_pixels: not over it.
  expect_size(qwen(4097, 4097), 4096, 4096);
  // Below min_pixels: 10 × 10 rounds to 0 × 0; beta = sqrt(65536 / 100) = 25.6; ceil(10 · 25.6 / 32) = 8.
  expect_size(qwen(10, 10), 256, 256);
  expect_size(qwen(100, 100), 256, 256);  // beta 2.56: ceil(8) = 8
  // Above max_pixels: 6000 × 8000 rounds to 6016 × 8000 = 48,128,000 > 16,777,216;
  // beta = sqrt(48e6 / 16777216) = 1.69146; floor(6000 / 1.69146 / 32) = 110, floor(8000 / .. / 32) = 147.
  expect_size(qwen(6000, 8000), 3520, 4704);
  // The pixel bounds are parameters: 2000² at max 1024²: beta = sqrt(4e6 / 1048576) = 1.953125
  // exactly, 2000 / 1.953125 = 1024.
  expect_size(smart_resize(2000, 2000, 32, 65536, 1024 * 1024), 1024, 1024);
  // Tall and thin, within the ratio: the short side's round is 0 and the min branch restores it.
  expect_size(qwen(1, 200), 32, 3648);
  expect_size(qwen(200, 1), 3648, 32);
  expect_size(qwen(20000, 100), 20000, 96);
}

TEST(SmartResize, AspectRatioOver200IsRefused) {
  for (auto [h, w] : {std::pair{1, 201}, std::pair{201, 1}, std::pair{10, 2001}, std::pair{40000, 199}}) {
    try {
      qwen(h, w);
      ADD_FAILURE() << h << "x" << w << " accepted";
    } catch (const ImageError& e) {
      EXPECT_EQ(e.http_status(), 400);
      EXPECT_NE(std::string(e.what()).find("aspect ratio must be smaller than 200"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(qwen(10, 2000));  // exactly 200: allowed
}

// Each pixel's value names its coordinates: red = x, green = y, blue = a mix. The expected value at
// every (row, column) of the output is derived from the reference's reshape dimensions alone.
TEST(ImageProcessor, PatchOrderIsTheReferencesMergeWindowOrder) {
  const int W = 96, H = 64;  // multiples of 32: no resampling, so every value is a known pixel
  RgbImage image{W, H, std::vector<uint8_t>(size_t(W) * H * 3)};
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      uint8_t* p = &image.rgb[(size_t(y) * W + x) * 3];
      p[0] = uint8_t(x), p[1] = uint8_t(y), p[2] = uint8_t(x * 7 + y * 3);
    }
  VisionProcessorConfig config;
  config.min_pixels = 32 * 32;
  const PixelPatches out = preprocess_image(image, config);
  ASSERT_EQ(out.resized.height, H);
  ASSERT_EQ(out.resized.width, W);
  EXPECT_EQ(out.grid_t, 1);
  EXPECT_EQ(out.grid_h, 4);
  EXPECT_EQ(out.grid_w, 6);
  EXPECT_EQ(out.patch_dim, 3 * 2 * 16 * 16);
  EXPECT_EQ(out.vision_tokens, 4 * 6 / 4);
  ASSERT_EQ(out.values.size(), size_t(4 * 6) * 1536);

  // Reference: [1, 2(t), 3(c), 2(gh/2), 2, 16, 3(gw/2), 2, 16] permuted to
  // [1, gh/2, gw/2, 2, 2, c, t, 16, 16]; unflatten each index by those sizes.
  for (size_t row = 0; row < 24; ++row) {
    const size_t mw = row % 2, mh = (row / 2) % 2, bw = (row / 4) % 3, bh = row / 12;
    for (size_t col = 0; col < 1536; ++col) {
      const size_t pw = col % 16, ph = (col / 16) % 16, c = col / 512;
      const size_t y = (bh * 2 + mh) * 16 + ph, x = (bw * 2 + mw) * 16 + pw;
      const uint8_t pixel = image.rgb[(y * W + x) * 3 + c];
      const float want = (static_cast<float>(pixel) - 127.5f) / 127.5f;
      ASSERT_EQ(out.values[row * 1536 + col], want) << "row " << row << " col " << col;
    }
  }
  // A merge window's four rows are one 32 × 32 square: its red channel (x) spans 32 columns.
  for (size_t window = 0; window < 6; ++window) {
    float lo = 1e9f, hi = -1e9f;
    for (size_t r = window * 4; r < window * 4 + 4; ++r)
      for (size_t k = 0; k < 256; ++k) lo = std::min(lo, out.values[r * 1536 + k]), hi = std::max(hi, out.values[r * 1536 + k]);
    EXPECT_EQ(std::lround(hi * 127.5f + 127.5f) - std::lround(lo * 127.5f + 127.5f), 31) << window;
  }
}

TEST(ImageProcessor, NormalisationIsTheFusedFloat32OfTheTorchvisionBackend) {
  RgbImage image{32, 32, std::vector<uint8_t>(32 * 32 * 3)};
  for (size_t i = 0; i < image.rgb.size(); ++i) image.rgb[i] = uint8_t(i % 256);
  VisionProcessorConfig config;
  config.min_pixels = 1024;
  const PixelPatches out = preprocess_image(image, config);
  ASSERT_EQ(out.values.size(), 4u * 1536);  // a 2 × 2 grid, one merge window
  EXPECT_EQ(out.vision_tokens, 1);
  float lo = 0, hi = 0;
  for (float v : out.values) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_EQ(lo, -1.0f);  // (0 - 127.5) / 127.5
  EXPECT_EQ(hi, 1.0f);   // (255 - 127.5) / 127.5
  // Other means and stds: (x - mean·255) / (std·255), each product rounded to float32 first.
  config.image_mean = {0.48145466f, 0.4578275f, 0.40821073f};
  config.image_std = {0.26862954f, 0.26130258f, 0.27577711f};
  const PixelPatches clip = preprocess_image(image, config);
  const float m = 0.48145466f * 255.0f, s = 0.26862954f * 255.0f;
  const uint8_t first = image.rgb[0];  // row 0, column 0: pixel (0, 0), red
  EXPECT_EQ(clip.values[0], (static_cast<float>(first) - m) / s);
}

TEST(ImageProcessor, GridAndTokensForAScreenshot) {
  const RgbImage image = test::gradient_image(1366, 768);
  const PixelPatches out = preprocess_image(image);
  EXPECT_EQ(out.resized.height, 768);
  EXPECT_EQ(out.resized.width, 1376);  // 1366 / 32 = 42.69 → 43
  EXPECT_EQ(out.grid_t, 1);
  EXPECT_EQ(out.grid_h, 48);
  EXPECT_EQ(out.grid_w, 86);
  EXPECT_EQ(out.vision_tokens, 48 * 86 / 4);
  EXPECT_EQ(out.values.size(), size_t(48 * 86) * 1536);
  // The temporal pair: both frames carry the same samples.
  for (size_t row = 0; row < size_t(48 * 86); row += 97)
    for (size_t c = 0; c < 3; ++c)
      for (size_t k = 0; k < 256; ++k)
        ASSERT_EQ(out.values[row * 1536 + c * 512 + k], out.values[row * 1536 + c * 512 + 256 + k]);
}

// The same filter evaluated in double without integer weights: the uint8 path may differ from
// it by rounding (its weights are int16 at ~14 bits and its first pass is stored as uint8), never more
// than a level or two.
RgbImage reference_resize(const RgbImage& in, int width, int height) {
  auto taps = [](int64_t in_size, int64_t out_size, int64_t i, std::vector<double>& w) {
    const double scale = double(in_size) / double(out_size), support = scale >= 1 ? 2 * scale : 2;
    const double inv = scale >= 1 ? 1 / scale : 1, center = scale * (i + 0.5);
    const int64_t lo = std::max<int64_t>(int64_t(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(int64_t(center + support + 0.5), in_size);
    w.assign(in_size, 0.0);
    double total = 0;
    for (int64_t j = lo; j < hi; ++j) {
      const double x = std::abs((j - center + 0.5) * inv);
      w[j] = x < 1 ? (1.5 * x - 2.5) * x * x + 1 : x < 2 ? ((-0.5 * x + 2.5) * x - 4) * x + 2 : 0;
      total += w[j];
    }
    for (double& v : w) v /= total;
  };
  std::vector<double> mid(size_t(in.height) * width * 3), w;
  for (int x = 0; x < width; ++x) {
    taps(in.width, width, x, w);
    for (int y = 0; y < in.height; ++y)
      for (int c = 0; c < 3; ++c) {
        double s = 0;
        for (int j = 0; j < in.width; ++j) s += w[j] * in.rgb[(size_t(y) * in.width + j) * 3 + c];
        mid[(size_t(y) * width + x) * 3 + c] = std::clamp(std::round(s), 0.0, 255.0);
      }
  }
  RgbImage out{width, height, std::vector<uint8_t>(size_t(width) * height * 3)};
  for (int y = 0; y < height; ++y) {
    taps(in.height, height, y, w);
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) {
        double s = 0;
        for (int j = 0; j < in.height; ++j) s += w[j] * mid[(size_t(j) * width + x) * 3 + c];
        out.rgb[(size_t(y) * width + x) * 3 + c] = uint8_t(std::clamp(std::round(s), 0.0, 255.0));
      }
  }
  return out;
}

TEST(ImageResize, MatchesTheFilterInDoubleWithinRounding) {
  const RgbImage image = test::pattern_image(53, 41, 11);
  for (auto [w, h] : {std::pair{32, 32}, std::pair{96, 64}, std::pair{20, 77}, std::pair{53, 19}, std::pair{160, 41}}) {
    const RgbImage got = resize_bicubic(image, w, h);
    const RgbImage want = reference_resize(image, w, h);
    ASSERT_EQ(got.width, w);
    ASSERT_EQ(got.height, h);
    int worst = 0;
    for (size_t i = 0; i < got.rgb.size(); ++i) worst = std::max(worst, std::abs(int(got.rgb[i]) - int(want.rgb[i])));
    EXPECT_LE(worst, 1) << w << "x" << h;
  }
}

TEST(ImageResize, ConstantsStayConstantAndSameSizeIsIdentity) {
  RgbImage flat{45, 31, {}};
  for (int i = 0; i < 45 * 31; ++i) flat.rgb.insert(flat.rgb.end(), {0, 255, 77});
  const RgbImage up = resize_bicubic(flat, 128, 96), down = resize_bicubic(flat, 7, 5);
  for (const RgbImage* r : {&up, &down})
    for (size_t i = 0; i < r->rgb.size(); i += 3) {
      ASSERT_EQ(r->rgb[i], 0);
      ASSERT_EQ(r->rgb[i + 1], 255);
      ASSERT_EQ(r->rgb[i + 2], 77);
    }
  const RgbImage image = test::pattern_image(17, 9, 12);
  EXPECT_EQ(resize_bicubic(image, 17, 9).rgb, image.rgb);
  // One axis unchanged: only the other is resampled, so rows (or columns) stay independent.
  const RgbImage wide = resize_bicubic(image, 40, 9);
  EXPECT_EQ(wide.height, 9);
}

TEST(ImageHash, IsSha256OfTheBytes) {
  const std::string abc = "abc";
  EXPECT_EQ(hash_image_bytes({reinterpret_cast<const uint8_t*>(abc.data()), abc.size()}).hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hash_image_bytes({}).hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  std::vector<uint8_t> png = test::encode_png(test::pattern_image(8, 8, 13));
  const ImageDigest first = hash_image_bytes(png);
  EXPECT_EQ(hash_image_bytes(png), first);
  png.back() ^= 1;
  EXPECT_NE(hash_image_bytes(png), first);
}

}  // namespace
}  // namespace rocket
