#include "vision/image_decode.h"

#include <cstring>

#include <fmt/format.h>

#include "vision/image_codecs.h"
#include "vision/image_error.h"

namespace rocket {

std::string_view image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::png: return "PNG";
    case ImageFormat::jpeg: return "JPEG";
    case ImageFormat::webp: return "WebP";
  }
  return "?";
}

ImageFormat sniff_image_format(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= sizeof kPng && std::memcmp(bytes.data(), kPng, sizeof kPng) == 0) return ImageFormat::png;
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) return ImageFormat::jpeg;
  if (bytes.size() >= 12 && std::memcmp(bytes.data(), "RIFF", 4) == 0 && std::memcmp(bytes.data() + 8, "WEBP", 4) == 0)
    return ImageFormat::webp;
  if (bytes.empty()) throw ImageError(ImageError::Kind::malformed, "the image is empty (0 bytes)");
  throw ImageError(ImageError::Kind::malformed,
                   "the image is not a PNG, JPEG or WebP (its first bytes are no signature of those formats)");
}

void check_pixel_bound(std::string_view format, uint64_t width, uint64_t height, uint64_t max_pixels) {
  if (width == 0 || height == 0)
    throw ImageError(ImageError::Kind::malformed, fmt::format("the {} image is {}x{}: it has no pixels", format, width, height));
  // Both come from 32-bit header fields, so the product fits in 64 bits.
  if (width * height > max_pixels)
    throw ImageError(ImageError::Kind::too_large,
                     fmt::format("the {} image is {}x{} = {} pixels, over this server's limit of {} pixels", format,
                                 width, height, width * height, max_pixels));
}

RgbImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (bytes.size() > limits.max_bytes)
    throw ImageError(ImageError::Kind::too_large,
                     fmt::format("the image is {} bytes, over this server's limit of {} bytes", bytes.size(), limits.max_bytes));
  int orientation = 1;
  RgbImage image;
  switch (sniff_image_format(bytes)) {
    case ImageFormat::png: image = decode_png(bytes, limits.max_pixels, orientation); break;
    case ImageFormat::jpeg: image = decode_jpeg(bytes, limits.max_pixels, orientation); break;
    case ImageFormat::webp: image = decode_webp(bytes, limits.max_pixels, orientation); break;
  }
  return apply_orientation(std::move(image), orientation);
}

}  // namespace rocket
