// What decode_image (image_decode.cc) dispatches to: one decoder per format, each in its own file
// (image_png.cc, image_jpeg.cc, image_webp.cc), and the EXIF orientation they share
// (image_orientation.cc). Internal to src/vision: callers use image_decode.h.
//
// Each decoder: REQUIRES the bytes start with its format's magic and are within the byte bound.
// It checks width × height against `max_pixels` from the header before decoding a pixel, returns
// RGB with the stored orientation (`orientation` gets the EXIF value, 1 when absent or unreadable),
// and reports every failure as an ImageError.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "vision/image_decode.h"

namespace rocket {

RgbImage decode_png(std::span<const uint8_t> bytes, uint64_t max_pixels, int& orientation);
RgbImage decode_jpeg(std::span<const uint8_t> bytes, uint64_t max_pixels, int& orientation);
RgbImage decode_webp(std::span<const uint8_t> bytes, uint64_t max_pixels, int& orientation);

// The Orientation tag (0x0112) of an EXIF block (a TIFF header and IFD0, optionally after the
// "Exif\0\0" that JPEG's APP1 carries); 1 when absent, out of range or unreadable: like PIL, a
// broken EXIF block does not refuse the image.
int exif_orientation(std::span<const uint8_t> exif);

// `image` turned upright as PIL's ImageOps.exif_transpose turns it for orientation 2..8.
RgbImage apply_orientation(RgbImage image, int orientation);

// The shared refusal of a header's size: ImageError (too_large) naming both numbers.
void check_pixel_bound(std::string_view format, uint64_t width, uint64_t height, uint64_t max_pixels);

}  // namespace rocket
