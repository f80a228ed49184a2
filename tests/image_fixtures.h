// Encoders for the image tests, through the same libraries' write APIs (libpng, libjpeg-turbo,
// libwebp): the decoder under test is checked against images made here, never against files of
// unknown origin. Test-only code: an encoder failure fails the test.
#pragma once

#include <png.h>
#include <webp/encode.h>
#include <cstdio>
#include <jpeglib.h>
#include <gtest/gtest.h>

#include <csetjmp>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "vision/image_decode.h"

namespace rocket::test {

// Distinct values across pixels and channels, with a seeded random part so no two tests agree on
// zeros by accident.
inline RgbImage pattern_image(int width, int height, uint32_t seed) {
  RgbImage image{width, height, std::vector<uint8_t>(size_t(width) * height * 3)};
  std::mt19937 rng(seed);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.rgb[(size_t(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(x * 5 + y * 3);
      p[1] = static_cast<uint8_t>(y * 7 + (rng() & 15));
      p[2] = static_cast<uint8_t>(rng());
    }
  return image;
}

// A smooth image, for lossy codecs compared with a tolerance.
inline RgbImage gradient_image(int width, int height) {
  RgbImage image{width, height, std::vector<uint8_t>(size_t(width) * height * 3)};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.rgb[(size_t(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(255 * x / std::max(1, width - 1));
      p[1] = static_cast<uint8_t>(255 * y / std::max(1, height - 1));
      p[2] = static_cast<uint8_t>(128 + 60 * ((x / 8 + y / 8) % 2));
    }
  return image;
}

struct PngSpec {
  int width = 0, height = 0;
  int color_type = PNG_COLOR_TYPE_RGB;
  int bit_depth = 8;
  bool interlace = false;
  std::vector<uint8_t> samples{};    // packed rows as libpng writes them (16-bit big-endian)
  std::vector<png_color> palette{};
  std::vector<uint8_t> transparency{};  // tRNS for a palette
  std::vector<uint8_t> exif{};        // an eXIf chunk (a TIFF block) when non-empty
};

inline void png_append(png_structp png, png_bytep data, size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

inline std::vector<uint8_t> encode_png(const PngSpec& spec) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    ADD_FAILURE() << "libpng could not write the test image";
    return {};
  }
  png_set_write_fn(png, &out, png_append, nullptr);
  png_set_IHDR(png, info, spec.width, spec.height, spec.bit_depth, spec.color_type,
               spec.interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!spec.palette.empty()) png_set_PLTE(png, info, spec.palette.data(), static_cast<int>(spec.palette.size()));
  if (!spec.transparency.empty())
    png_set_tRNS(png, info, spec.transparency.data(), static_cast<int>(spec.transparency.size()), nullptr);
  if (!spec.exif.empty()) png_set_eXIf_1(png, info, static_cast<png_uint_32>(spec.exif.size()), const_cast<png_bytep>(spec.exif.data()));
  png_write_info(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  std::vector<png_bytep> rows(spec.height);
  for (int y = 0; y < spec.height; ++y) rows[y] = const_cast<png_bytep>(spec.samples.data()) + y * row_bytes;
  png_write_image(png, rows.data());
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return out;
}

inline std::vector<uint8_t> encode_png(const RgbImage& image) {
  return encode_png(PngSpec{.width = image.width, .height = image.height, .samples = image.rgb});
}

struct JpegSpec {
  int quality = 95;
  bool progressive = false;
  bool gray = false;           // one component, from the red channel
  bool cmyk = false;           // four components, red, green, blue, 255 - red
  std::vector<uint8_t> app1{};   // written as an APP1 marker when non-empty ("Exif\0\0" + TIFF)
};

inline std::vector<uint8_t> encode_jpeg(const RgbImage& image, const JpegSpec& spec = {}) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);  // exits on error: test-only
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = image.width;
  cinfo.image_height = image.height;
  cinfo.input_components = spec.gray ? 1 : spec.cmyk ? 4 : 3;
  cinfo.in_color_space = spec.gray ? JCS_GRAYSCALE : spec.cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, spec.quality, TRUE);
  if (!spec.gray && !spec.cmyk) {
    // 4:4:4: no chroma subsampling, so the round trip is close at every pixel.
    for (int c = 0; c < 3; ++c) cinfo.comp_info[c].h_samp_factor = cinfo.comp_info[c].v_samp_factor = 1;
  }
  if (spec.progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  if (!spec.app1.empty()) jpeg_write_marker(&cinfo, JPEG_APP0 + 1, spec.app1.data(), static_cast<unsigned>(spec.app1.size()));
  std::vector<uint8_t> row(size_t(image.width) * cinfo.input_components);
  while (cinfo.next_scanline < cinfo.image_height) {
    const uint8_t* src = &image.rgb[size_t(cinfo.next_scanline) * image.width * 3];
    for (int x = 0; x < image.width; ++x) {
      if (spec.gray) row[x] = src[3 * x];
      else if (spec.cmyk) {
        for (int c = 0; c < 3; ++c) row[4 * x + c] = src[3 * x + c];
        row[4 * x + 3] = static_cast<uint8_t>(255 - src[3 * x]);
      } else {
        for (int c = 0; c < 3; ++c) row[3 * x + c] = src[3 * x + c];
      }
    }
    JSAMPROW p = row.data();
    jpeg_write_scanlines(&cinfo, &p, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> out(buffer, buffer + size);
  std::free(buffer);
  return out;
}

// Lossless keeps every sample; lossy (quality 0..100) is compared with a tolerance. With alpha, the
// samples are RGBA and every alpha is nonzero (the encoder may rewrite RGB under alpha 0).
inline std::vector<uint8_t> encode_webp(int width, int height, const std::vector<uint8_t>& samples, bool alpha,
                                        float lossy_quality = -1) {
  uint8_t* buffer = nullptr;
  size_t size;
  const int stride = width * (alpha ? 4 : 3);
  if (lossy_quality < 0)
    size = alpha ? WebPEncodeLosslessRGBA(samples.data(), width, height, stride, &buffer)
                 : WebPEncodeLosslessRGB(samples.data(), width, height, stride, &buffer);
  else
    size = alpha ? WebPEncodeRGBA(samples.data(), width, height, stride, lossy_quality, &buffer)
                 : WebPEncodeRGB(samples.data(), width, height, stride, lossy_quality, &buffer);
  EXPECT_GT(size, 0u) << "libwebp could not write the test image";
  std::vector<uint8_t> out(buffer, buffer + size);
  WebPFree(buffer);
  return out;
}

// An EXIF block (TIFF header + IFD0) holding one Orientation tag; little- or big-endian.
inline std::vector<uint8_t> exif_with_orientation(int orientation, bool little_endian, bool jpeg_prefix) {
  std::vector<uint8_t> out;
  if (jpeg_prefix) out = {'E', 'x', 'i', 'f', 0, 0};
  auto u16 = [&](unsigned v) {
    if (little_endian) out.insert(out.end(), {uint8_t(v), uint8_t(v >> 8)});
    else out.insert(out.end(), {uint8_t(v >> 8), uint8_t(v)});
  };
  auto u32 = [&](unsigned v) {
    if (little_endian) { u16(v & 0xffff); u16(v >> 16); }
    else { u16(v >> 16); u16(v & 0xffff); }
  };
  out.insert(out.end(), little_endian ? std::initializer_list<uint8_t>{'I', 'I'} : std::initializer_list<uint8_t>{'M', 'M'});
  u16(42);
  u32(8);       // IFD0 right after the header
  u16(2);       // two entries: an unrelated one first (ImageWidth), then Orientation
  u16(0x0100); u16(4); u32(1); u32(640);
  u16(0x0112); u16(3); u32(1); u16(orientation); u16(0);
  u32(0);       // no next IFD
  return out;
}

// Standard base64 with padding: the tests' data URLs (the tree decodes base64, it never encodes it).
inline std::string base64(const std::vector<uint8_t>& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = uint32_t(bytes[i]) << 16 | uint32_t(bytes[i + 1]) << 8 | bytes[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    const uint32_t v = uint32_t(bytes[i]) << 16 | (rest == 2 ? uint32_t(bytes[i + 1]) << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace rocket::test
