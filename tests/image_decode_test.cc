// vision/image_decode.h: PNG, JPEG and WebP made by the same libraries' encoders decode to the
// pixels PIL's Image.open(...).convert("RGB") gives (alpha dropped, gray and palettes expanded,
// 16-bit reduced), EXIF orientation applied as ImageOps.exif_transpose applies it; and every
// truncated, corrupt, oversized or unknown input is an ImageError, never a crash.
#include <gtest/gtest.h>

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "image_fixtures.h"
#include "vision/image_codecs.h"
#include "vision/image_error.h"

namespace rocket {
namespace {

using test::encode_jpeg;
using test::encode_png;
using test::encode_webp;
using test::exif_with_orientation;
using test::gradient_image;
using test::pattern_image;

// The ImageError decoding `bytes` throws; fails the test when it throws none or anything else.
ImageError refusal_of(const std::vector<uint8_t>& bytes, const ImageLimits& limits = {}) {
  try {
    decode_image(bytes, limits);
  } catch (const ImageError& e) {
    return e;
  }
  ADD_FAILURE() << "decoded without an error";
  return ImageError(ImageError::Kind::refused, "");
}

// Largest absolute difference between two images' samples.
int max_difference(const RgbImage& a, const RgbImage& b) {
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  if (a.rgb.size() != b.rgb.size()) return 256;
  int worst = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) worst = std::max(worst, std::abs(int(a.rgb[i]) - int(b.rgb[i])));
  return worst;
}

std::vector<uint8_t> with_alpha(const RgbImage& image, uint8_t min_alpha) {
  std::vector<uint8_t> rgba;
  for (size_t i = 0; i < image.rgb.size() / 3; ++i) {
    rgba.insert(rgba.end(), {image.rgb[3 * i], image.rgb[3 * i + 1], image.rgb[3 * i + 2]});
    rgba.push_back(static_cast<uint8_t>(std::max<size_t>(min_alpha, (i * 37) & 255)));
  }
  return rgba;
}

TEST(ImageDecode, SniffsTheFormatFromMagicBytes) {
  const RgbImage image = pattern_image(5, 4, 1);
  EXPECT_EQ(sniff_image_format(encode_png(image)), ImageFormat::png);
  EXPECT_EQ(sniff_image_format(encode_jpeg(image)), ImageFormat::jpeg);
  EXPECT_EQ(sniff_image_format(encode_webp(5, 4, image.rgb, false)), ImageFormat::webp);
  const std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0};
  EXPECT_NE(std::string(refusal_of(gif).what()).find("not a PNG, JPEG or WebP"), std::string::npos);
  EXPECT_NE(std::string(refusal_of({}).what()).find("empty"), std::string::npos);
  // RIFF of another kind (a WAVE file) is no WebP.
  const std::vector<uint8_t> wave = {'R', 'I', 'F', 'F', 4, 0, 0, 0, 'W', 'A', 'V', 'E'};
  EXPECT_EQ(refusal_of(wave).kind(), ImageError::Kind::malformed);
}

TEST(ImageDecode, PngRgbRoundTripsExactlyPlainAndInterlaced) {
  const RgbImage image = pattern_image(37, 23, 2);
  for (bool interlace : {false, true}) {
    const RgbImage back = decode_image(
        encode_png({.width = 37, .height = 23, .interlace = interlace, .samples = image.rgb}));
    EXPECT_EQ(back.width, 37);
    EXPECT_EQ(back.height, 23);
    EXPECT_EQ(back.rgb, image.rgb) << "interlace " << interlace;
  }
}

TEST(ImageDecode, PngAlphaIsDroppedNotComposited) {
  const RgbImage image = pattern_image(9, 7, 3);
  const std::vector<uint8_t> rgba = with_alpha(image, 0);
  const RgbImage back = decode_image(encode_png({.width = 9, .height = 7, .color_type = PNG_COLOR_TYPE_RGB_ALPHA, .samples = rgba}));
  EXPECT_EQ(back.rgb, image.rgb);

  // Gray + alpha: the gray replicated, the alpha gone.
  std::vector<uint8_t> ga;
  for (int i = 0; i < 9 * 7; ++i) ga.insert(ga.end(), {uint8_t(i * 3), uint8_t(255 - i)});
  const RgbImage gray = decode_image(encode_png({.width = 9, .height = 7, .color_type = PNG_COLOR_TYPE_GRAY_ALPHA, .samples = ga}));
  for (int i = 0; i < 9 * 7; ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(gray.rgb[3 * i + c], uint8_t(i * 3)) << i;
}

TEST(ImageDecode, PngGrayAtEveryDepthIsExpandedAsPilDoes) {
  // 8-bit: replicated. 1-, 2- and 4-bit: scaled to 0..255 (PIL's "1", "L;2", "L;4" unpackers).
  std::vector<uint8_t> gray8(6 * 3);
  for (size_t i = 0; i < gray8.size(); ++i) gray8[i] = uint8_t(i * 13);
  RgbImage back = decode_image(encode_png({.width = 6, .height = 3, .color_type = PNG_COLOR_TYPE_GRAY, .samples = gray8}));
  for (size_t i = 0; i < gray8.size(); ++i) ASSERT_EQ(back.rgb[3 * i + 1], gray8[i]);

  // 4-bit, 2 pixels a byte: values 0..15 → v × 17.
  std::vector<uint8_t> gray4 = {0x0f, 0x7a, 0x31, 0xc5};  // 8 pixels, one row of 8
  back = decode_image(encode_png({.width = 8, .height = 1, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = 4, .samples = gray4}));
  const int want4[] = {0x0, 0xf, 0x7, 0xa, 0x3, 0x1, 0xc, 0x5};
  for (int i = 0; i < 8; ++i) ASSERT_EQ(back.rgb[3 * i], want4[i] * 17) << i;

  // 1-bit: 0 or 255.
  back = decode_image(encode_png({.width = 8, .height = 1, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = 1, .samples = {0xa5}}));
  for (int i = 0; i < 8; ++i) ASSERT_EQ(back.rgb[3 * i + 2], (0xa5 >> (7 - i)) & 1 ? 255 : 0) << i;
}

TEST(ImageDecode, PngSixteenBitKeepsTheHighByteAndGraySixteenClipsAsPil) {
  // RGB 16: PIL reads "RGB;16B" as the high byte of each sample.
  std::vector<uint8_t> rgb16;
  for (int i = 0; i < 4 * 3 * 3; ++i) rgb16.insert(rgb16.end(), {uint8_t(i * 7), uint8_t(0xff - i)});
  RgbImage back = decode_image(encode_png({.width = 4, .height = 3, .bit_depth = 16, .samples = rgb16}));
  for (int i = 0; i < 4 * 3 * 3; ++i) ASSERT_EQ(back.rgb[i], uint8_t(i * 7)) << i;

  // Gray 16 is PIL's "I;16"; convert("RGB") clips it at 255.
  const std::vector<uint8_t> gray16 = {0x00, 0x05, 0x00, 0xff, 0x01, 0x00, 0xff, 0xff};
  back = decode_image(encode_png({.width = 4, .height = 1, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = 16, .samples = gray16}));
  const uint8_t want[] = {5, 255, 255, 255};
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(back.rgb[3 * i + c], want[i]) << i;
}

TEST(ImageDecode, PngPaletteExpandsAndIgnoresTransparency) {
  const std::vector<png_color> palette = {{10, 20, 30}, {200, 100, 50}, {0, 255, 7}};
  const std::vector<uint8_t> indices = {0, 1, 2, 2, 1, 0};
  const RgbImage back = decode_image(encode_png({.width = 3, .height = 2, .color_type = PNG_COLOR_TYPE_PALETTE,
                                                 .samples = indices, .palette = palette, .transparency = {0, 128}}));
  for (size_t i = 0; i < indices.size(); ++i) {
    const png_color& want = palette[indices[i]];
    ASSERT_EQ(back.rgb[3 * i], want.red);
    ASSERT_EQ(back.rgb[3 * i + 1], want.green);
    ASSERT_EQ(back.rgb[3 * i + 2], want.blue);
  }
}

TEST(ImageDecode, JpegRoundTripsWithinTheCodecsLoss) {
  const RgbImage image = gradient_image(64, 48);
  const RgbImage back = decode_image(encode_jpeg(image, {.quality = 98}));
  EXPECT_LE(max_difference(back, image), 12);
  // Progressive is a reordering of the same quantised coefficients: the same pixels exactly.
  const RgbImage progressive = decode_image(encode_jpeg(image, {.quality = 98, .progressive = true}));
  EXPECT_EQ(progressive.rgb, back.rgb);
}

TEST(ImageDecode, JpegGrayIsReplicated) {
  const RgbImage image = gradient_image(16, 16);
  const RgbImage back = decode_image(encode_jpeg(image, {.quality = 100, .gray = true}));
  for (size_t i = 0; i < back.rgb.size(); i += 3) {
    ASSERT_EQ(back.rgb[i], back.rgb[i + 1]);
    ASSERT_EQ(back.rgb[i], back.rgb[i + 2]);
    ASSERT_LE(std::abs(int(back.rgb[i]) - int(image.rgb[i])), 3) << i;
  }
}

TEST(ImageDecode, JpegCmykIsRefusedClearly) {
  const ImageError e = refusal_of(encode_jpeg(gradient_image(8, 8), {.cmyk = true}));
  EXPECT_EQ(e.http_status(), 400);
  EXPECT_NE(std::string(e.what()).find("CMYK"), std::string::npos);
}

TEST(ImageDecode, WebpLosslessRoundTripsExactlyAndDropsAlpha) {
  const RgbImage image = pattern_image(21, 13, 4);
  EXPECT_EQ(decode_image(encode_webp(21, 13, image.rgb, false)).rgb, image.rgb);
  // Every alpha nonzero: the lossless encoder may rewrite the RGB under alpha 0.
  const RgbImage back = decode_image(encode_webp(21, 13, with_alpha(image, 1), true));
  EXPECT_EQ(back.width, 21);
  EXPECT_EQ(back.height, 13);
  EXPECT_EQ(back.rgb, image.rgb);
}

TEST(ImageDecode, WebpLossyRoundTripsWithinTheCodecsLoss) {
  const RgbImage image = gradient_image(48, 32);
  const RgbImage back = decode_image(encode_webp(48, 32, image.rgb, false, 100));
  EXPECT_LE(max_difference(back, image), 40);
  double sum = 0;
  for (size_t i = 0; i < image.rgb.size(); ++i) sum += std::abs(int(back.rgb[i]) - int(image.rgb[i]));
  EXPECT_LT(sum / image.rgb.size(), 4.0);
}

TEST(ImageDecode, AnimatedWebpIsRefused) {
  // A VP8X header whose flags say "animation" (bit 1), canvas 2x2.
  const std::vector<uint8_t> vp8x = {'R', 'I', 'F', 'F', 22, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 10, 0, 0, 0,
                                     0x02, 0, 0, 0, 1, 0, 0, 1, 0, 0};
  const ImageError e = refusal_of(vp8x);
  EXPECT_NE(std::string(e.what()).find("animated"), std::string::npos) << e.what();
}

// PIL's exif_transpose on a 3x2 image a b c / d e f, written out by hand for each orientation.
TEST(ImageDecode, OrientationTurnsTheImageAsPilsExifTranspose) {
  RgbImage image{3, 2, {}};
  for (uint8_t v : {'a', 'b', 'c', 'd', 'e', 'f'}) image.rgb.insert(image.rgb.end(), {v, uint8_t(v + 1), uint8_t(v + 2)});
  auto letters = [](const RgbImage& im) {
    std::string s;
    for (int y = 0; y < im.height; ++y) {
      for (int x = 0; x < im.width; ++x) s.push_back(static_cast<char>(im.rgb[(size_t(y) * im.width + x) * 3]));
      s.push_back('/');
    }
    return s;
  };
  const char* want[] = {"", "abc/def/", "cba/fed/", "fed/cba/", "def/abc/", "ad/be/cf/", "da/eb/fc/", "fc/eb/da/", "cf/be/ad/"};
  for (int o = 1; o <= 8; ++o) EXPECT_EQ(letters(apply_orientation(image, o)), want[o]) << "orientation " << o;
  // The other two channels travel with the first.
  const RgbImage turned = apply_orientation(image, 6);
  for (size_t i = 0; i < turned.rgb.size(); i += 3) EXPECT_EQ(turned.rgb[i + 2], turned.rgb[i] + 2);
}

TEST(ImageDecode, ExifOrientationIsReadFromEitherByteOrderAndIgnoredWhenBroken) {
  for (int o = 1; o <= 8; ++o) {
    EXPECT_EQ(exif_orientation(exif_with_orientation(o, true, true)), o);
    EXPECT_EQ(exif_orientation(exif_with_orientation(o, false, false)), o);
  }
  EXPECT_EQ(exif_orientation(exif_with_orientation(9, true, false)), 1);
  std::vector<uint8_t> cut = exif_with_orientation(6, true, false);
  for (size_t n = 0; n < cut.size(); ++n) {
    const int got = exif_orientation(std::span(cut.data(), n));
    EXPECT_TRUE(got == 1 || got == 6) << n;
  }
  std::vector<uint8_t> far = exif_with_orientation(6, true, false);
  far[4] = 0xff;  // IFD0 offset beyond the block
  EXPECT_EQ(exif_orientation(far), 1);
}

TEST(ImageDecode, JpegAndPngApplyTheirExifOrientation) {
  const RgbImage image = gradient_image(24, 16);
  const RgbImage upright = decode_image(encode_jpeg(image, {.quality = 100}));
  for (int o = 1; o <= 8; ++o) {
    const RgbImage got = decode_image(encode_jpeg(image, {.quality = 100, .app1 = exif_with_orientation(o, o % 2, true)}));
    const RgbImage want = apply_orientation(upright, o);
    EXPECT_EQ(got.width, want.width) << o;
    EXPECT_EQ(got.rgb, want.rgb) << o;
  }
  const RgbImage png = decode_image(
      encode_png({.width = 24, .height = 16, .samples = image.rgb, .exif = exif_with_orientation(8, false, false)}));
  EXPECT_EQ(png.width, 16);
  EXPECT_EQ(png.rgb, apply_orientation(image, 8).rgb);
}

TEST(ImageDecode, TruncatedImagesAreErrorsAtEveryLength) {
  const RgbImage image = pattern_image(40, 30, 5);
  const std::vector<std::vector<uint8_t>> files = {encode_png(image), encode_jpeg(image), encode_jpeg(image, {.progressive = true}),
                                                   encode_webp(40, 30, image.rgb, false), encode_webp(40, 30, image.rgb, false, 80)};
  for (const auto& file : files) {
    // Every cut that drops image data; the last bytes of a PNG (IEND) and a JPEG (EOI) carry none.
    const size_t keep = sniff_image_format(file) == ImageFormat::webp ? file.size() : file.size() - 12;
    for (size_t n = 0; n < keep; n += 1 + n / 16) {
      const std::vector<uint8_t> cut(file.begin(), file.begin() + n);
      const ImageError e = refusal_of(cut);
      EXPECT_EQ(e.http_status(), 400) << n;
    }
  }
}

TEST(ImageDecode, CorruptBytesNeverCrash) {
  const RgbImage image = pattern_image(32, 32, 6);
  const std::vector<std::vector<uint8_t>> files = {encode_png(image), encode_jpeg(image, {.progressive = true}),
                                                   encode_webp(32, 32, image.rgb, false)};
  std::mt19937 rng(7);
  for (const auto& file : files) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<uint8_t> bad = file;
      for (int k = 0; k < 4; ++k) bad[16 + rng() % (bad.size() - 16)] = static_cast<uint8_t>(rng());
      try {
        const RgbImage got = decode_image(bad);
        ASSERT_EQ(got.rgb.size(), size_t(got.width) * got.height * 3);
      } catch (const ImageError&) {
      }
    }
  }
}

// A PNG's IHDR rewritten to claim `width` × `height` (CRC fixed), its data left as it was.
std::vector<uint8_t> png_claiming(std::vector<uint8_t> png, uint32_t width, uint32_t height) {
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = uint8_t(width >> (24 - 8 * i));
    png[20 + i] = uint8_t(height >> (24 - 8 * i));
  }
  const uLong crc = crc32(0, png.data() + 12, 17);  // "IHDR" + 13 bytes
  for (int i = 0; i < 4; ++i) png[29 + i] = uint8_t(crc >> (24 - 8 * i));
  return png;
}

// A JPEG's SOF rewritten to claim `width` × `height`.
std::vector<uint8_t> jpeg_claiming(std::vector<uint8_t> jpeg, uint16_t width, uint16_t height) {
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && (jpeg[i + 1] == 0xc0 || jpeg[i + 1] == 0xc2)) {
      jpeg[i + 5] = uint8_t(height >> 8), jpeg[i + 6] = uint8_t(height);
      jpeg[i + 7] = uint8_t(width >> 8), jpeg[i + 8] = uint8_t(width);
      return jpeg;
    }
  }
  ADD_FAILURE() << "no SOF marker";
  return jpeg;
}

TEST(ImageDecode, BombHeadersAreRefusedBeforeDecoding) {
  const RgbImage image = pattern_image(16, 16, 8);
  // 60000 × 60000 = 3.6e9 pixels stated in a file of a few hundred bytes.
  for (const auto& bomb : {png_claiming(encode_png(image), 60000, 60000), jpeg_claiming(encode_jpeg(image), 60000, 60000)}) {
    const ImageError e = refusal_of(bomb);
    EXPECT_EQ(e.kind(), ImageError::Kind::too_large) << e.what();
    EXPECT_EQ(e.http_status(), 413);
    EXPECT_NE(std::string(e.what()).find("60000x60000"), std::string::npos) << e.what();
  }
  // The bound is a parameter: 16 × 16 = 256 pixels is over 255, in every format.
  const ImageLimits tight{.max_pixels = 255};
  for (const auto& file : {encode_png(image), encode_jpeg(image), encode_webp(16, 16, image.rgb, false)})
    EXPECT_EQ(refusal_of(file, tight).kind(), ImageError::Kind::too_large);
  EXPECT_EQ(decode_image(encode_png(image), {.max_pixels = 256}).width, 16);
}

TEST(ImageDecode, ByteBoundAndZeroSizesAreRefused) {
  const std::vector<uint8_t> png = encode_png(pattern_image(4, 4, 9));
  const ImageError big = refusal_of(png, {.max_bytes = png.size() - 1});
  EXPECT_EQ(big.http_status(), 413);
  EXPECT_NO_THROW(decode_image(png, {.max_bytes = png.size()}));
  EXPECT_EQ(refusal_of(png_claiming(png, 0, 4)).http_status(), 400);
  EXPECT_EQ(refusal_of(jpeg_claiming(encode_jpeg(pattern_image(8, 8, 9)), 8, 0)).http_status(), 400);
}

}  // namespace
}  // namespace rocket
