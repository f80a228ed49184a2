// EXIF orientation, as PIL's ImageOps.exif_transpose reads and applies it: the Orientation tag of
// IFD0, then one of PIL's seven transposes.
#include <cstring>

#include "vision/image_codecs.h"

namespace rocket {

int exif_orientation(std::span<const uint8_t> exif) {
  if (exif.size() >= 6 && std::memcmp(exif.data(), "Exif\0\0", 6) == 0) exif = exif.subspan(6);
  if (exif.size() < 8) return 1;
  bool little;
  if (exif[0] == 'I' && exif[1] == 'I') little = true;
  else if (exif[0] == 'M' && exif[1] == 'M') little = false;
  else return 1;
  auto u16 = [&](size_t at) -> uint32_t {
    return little ? exif[at] | exif[at + 1] << 8 : exif[at] << 8 | exif[at + 1];
  };
  auto u32 = [&](size_t at) -> uint64_t {
    return little ? uint64_t{u16(at)} | uint64_t{u16(at + 2)} << 16 : uint64_t{u16(at)} << 16 | u16(at + 2);
  };
  if (u16(2) != 42) return 1;
  const uint64_t ifd = u32(4);
  if (ifd > exif.size() || exif.size() - ifd < 2) return 1;
  const uint32_t entries = u16(ifd);
  for (uint32_t i = 0; i < entries; ++i) {
    const uint64_t entry = ifd + 2 + uint64_t{i} * 12;
    if (entry + 12 > exif.size()) return 1;
    // Tag 0x0112, type SHORT (3), count 1: the value sits in the entry's first two value bytes.
    if (u16(entry) != 0x0112) continue;
    if (u16(entry + 2) != 3 || u32(entry + 4) != 1) return 1;
    const uint32_t value = u16(entry + 8);
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

RgbImage apply_orientation(RgbImage image, int orientation) {
  if (orientation <= 1 || orientation > 8) return image;
  const int w = image.width, h = image.height;
  const bool swap = orientation >= 5;  // 5..8 turn the image a quarter, swapping its sides
  RgbImage out;
  out.width = swap ? h : w;
  out.height = swap ? w : h;
  out.rgb.resize(image.rgb.size());
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;
      switch (orientation) {
        case 2: sx = w - 1 - x; break;                  // FLIP_LEFT_RIGHT
        case 3: sx = w - 1 - x; sy = h - 1 - y; break;  // ROTATE_180
        case 4: sy = h - 1 - y; break;                  // FLIP_TOP_BOTTOM
        case 5: sx = y; sy = x; break;                  // TRANSPOSE
        case 6: sx = y; sy = h - 1 - x; break;          // ROTATE_270 (a quarter turn clockwise)
        case 7: sx = w - 1 - y; sy = h - 1 - x; break;  // TRANSVERSE
        case 8: sx = w - 1 - y; sy = x; break;          // ROTATE_90 (a quarter turn counter-clockwise)
      }
      std::memcpy(&out.rgb[(size_t(y) * out.width + x) * 3], &image.rgb[(size_t(sy) * w + sx) * 3], 3);
    }
  }
  return out;
}

}  // namespace rocket
