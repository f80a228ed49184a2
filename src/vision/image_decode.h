// Client image bytes → 8-bit RGB pixels, as the HF reference loads them: `PIL.Image.open`, then
// `ImageOps.exif_transpose`, then `convert("RGB")` (transformers' `load_image`, docs/images.md).
//
// Formats: PNG (libpng), JPEG (libjpeg-turbo), WebP (libwebp), told apart by their magic bytes,
// never by a declared media type. What `convert("RGB")` does, done here: grayscale and palettes
// expanded, alpha dropped (not composited), 16-bit samples reduced to their high byte. The EXIF
// orientation of a JPEG (APP1), PNG (eXIf) or WebP (EXIF chunk) is applied.
//
// Bounds, both checked before any pixel is decoded: the byte count, and width × height from the
// header (a decompression bomb states its size there). Every refusal and every codec error is an
// ImageError; no input crashes, aborts or longjmps through C++ frames (tests/fuzz/image_fuzz.cc).
// Thread-safe: no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace rocket {

enum class ImageFormat { png, jpeg, webp };

std::string_view image_format_name(ImageFormat format);

struct ImageLimits {
  size_t max_bytes = size_t{20} << 20;       // encoded bytes
  uint64_t max_pixels = uint64_t{1} << 26;   // decoded width × height (8192²); PIL warns at 89,478,485
};

// Interleaved RGB, row-major, no padding: pixel (x, y) channel c is rgb[(y * width + x) * 3 + c].
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;
};

// The format the magic bytes name; ImageError (malformed) when they name none of the three.
ImageFormat sniff_image_format(std::span<const uint8_t> bytes);

RgbImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

}  // namespace rocket
