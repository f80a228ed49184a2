// PNG through libpng. libpng reports errors by longjmp: each phase that calls into it runs in a
// C-style frame (no objects with destructors) holding its own setjmp, and reports failure by
// return value; the C++ caller, which owns every resource, turns that into an ImageError.
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "vision/image_codecs.h"
#include "vision/image_error.h"

namespace rocket {
namespace {

// Ancillary chunks (iCCP, zTXt, ...) are decompressed into memory; bound them so a small file cannot
// ask for much.
constexpr png_alloc_size_t kPngChunkMax = png_alloc_size_t{8} << 20;

struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t at;
  char message[256];
};

void png_source_read(png_structp png, png_bytep out, size_t n) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (source->size - source->at < n) png_error(png, "the PNG data ends early (truncated)");
  std::memcpy(out, source->data + source->at, n);
  source->at += n;
}

void png_on_error(png_structp png, png_const_charp message) {
  auto* source = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(source->message, sizeof source->message, "%s", message);
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}

// Owns libpng's structs; destroyed on every path, after any longjmp has landed.
struct PngHandle {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngSource source{};
  PngHandle(const PngHandle&) = delete;
  PngHandle& operator=(const PngHandle&) = delete;
  PngHandle() = default;
  ~PngHandle() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
};

struct PngHeader {
  png_uint_32 width, height;
  int bit_depth, color_type;
  bool gray16;  // 16-bit grayscale without alpha: PIL's "I;16", clipped rather than shifted
  int orientation;
};

// Phase 1: the header, the EXIF block before IDAT, and the transforms to 8-bit RGB.
bool png_read_header(PngHandle& h, PngHeader& out) {
  if (setjmp(png_jmpbuf(h.png))) return false;
  png_set_read_fn(h.png, &h.source, png_source_read);
  png_set_chunk_malloc_max(h.png, kPngChunkMax);
  png_read_info(h.png, h.info);
  out.width = png_get_image_width(h.png, h.info);
  out.height = png_get_image_height(h.png, h.info);
  out.bit_depth = png_get_bit_depth(h.png, h.info);
  out.color_type = png_get_color_type(h.png, h.info);
  out.orientation = 1;
  png_uint_32 exif_size = 0;
  png_bytep exif = nullptr;
  if (png_get_eXIf_1(h.png, h.info, &exif_size, &exif) && exif) out.orientation = exif_orientation({exif, exif_size});

  // What PIL's convert("RGB") makes of each PNG mode: palettes and gray expanded, alpha and tRNS
  // dropped, 16-bit color reduced to its high byte (PIL reads "RGB;16B" that way). 16-bit gray
  // alone is PIL's "I;16", which convert("RGB") clips to 255: kept 16-bit here and clipped after.
  out.gray16 = out.color_type == PNG_COLOR_TYPE_GRAY && out.bit_depth == 16;
  if (out.color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(h.png);
  if ((out.color_type & PNG_COLOR_MASK_COLOR) == 0 && out.bit_depth < 8) png_set_expand_gray_1_2_4_to_8(h.png);
  if (out.color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(h.png);
  if (out.bit_depth == 16 && !out.gray16) png_set_strip_16(h.png);
  if (!out.gray16 && (out.color_type & PNG_COLOR_MASK_COLOR) == 0) png_set_gray_to_rgb(h.png);
  png_set_interlace_handling(h.png);
  png_read_update_info(h.png, h.info);
  return true;
}

// Phase 2: every row into `rows` (set up by the caller; `row_bytes` each).
bool png_read_pixels(PngHandle& h, png_bytepp rows) {
  if (setjmp(png_jmpbuf(h.png))) return false;
  png_read_image(h.png, rows);
  return true;
}

// Phase 3: chunks after IDAT, for an eXIf placed there. PIL ignores a broken tail, so failure here
// only means "no orientation found".
bool png_read_tail(PngHandle& h, png_infop end_info, int& orientation) {
  if (setjmp(png_jmpbuf(h.png))) return false;
  png_read_end(h.png, end_info);
  png_uint_32 exif_size = 0;
  png_bytep exif = nullptr;
  if (png_get_eXIf_1(h.png, end_info, &exif_size, &exif) && exif) orientation = exif_orientation({exif, exif_size});
  return true;
}

[[noreturn]] void png_failed(const PngHandle& h) {
  throw ImageError(ImageError::Kind::malformed, fmt::format("the PNG image cannot be decoded: {}", h.source.message));
}

}  // namespace

RgbImage decode_png(std::span<const uint8_t> bytes, uint64_t max_pixels, int& orientation) {
  PngHandle h;
  h.source = {bytes.data(), bytes.size(), 0, "unknown libpng error"};
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &h.source, png_on_error, png_on_warning);
  if (!h.png || !(h.info = png_create_info_struct(h.png))) throw std::bad_alloc();

  PngHeader header{};
  if (!png_read_header(h, header)) png_failed(h);
  check_pixel_bound("PNG", header.width, header.height, max_pixels);
  // Expanding a palette expands its tRNS to alpha too (libpng has no way to ask for one without the
  // other): four channels then, the fourth dropped below.
  const size_t row_bytes = png_get_rowbytes(h.png, h.info);
  const size_t channels = png_get_channels(h.png, h.info);
  const size_t expected = size_t{header.width} * (header.gray16 ? 2 : channels);
  CHECK(row_bytes == expected && (header.gray16 ? channels == 1 : channels == 3 || channels == 4),
        fmt::format("libpng rows of {} bytes in {} channels, expected {} bytes", row_bytes, channels, expected));

  std::vector<uint8_t> pixels(row_bytes * header.height);
  std::vector<png_bytep> rows(header.height);
  for (png_uint_32 y = 0; y < header.height; ++y) rows[y] = pixels.data() + size_t{y} * row_bytes;
  if (!png_read_pixels(h, rows.data())) png_failed(h);

  orientation = header.orientation;
  if (png_infop end_info = png_create_info_struct(h.png)) {
    png_read_tail(h, end_info, orientation);
    png_destroy_info_struct(h.png, &end_info);
  }

  RgbImage image{static_cast<int>(header.width), static_cast<int>(header.height), {}};
  const size_t count = size_t{header.width} * header.height;
  if (!header.gray16 && channels == 3) {
    image.rgb = std::move(pixels);
    return image;
  }
  image.rgb.resize(count * 3);
  if (header.gray16) {
    for (size_t i = 0; i < count; ++i) {
      const unsigned v = pixels[2 * i] << 8 | pixels[2 * i + 1];  // PNG samples are big-endian
      std::fill_n(&image.rgb[3 * i], 3, static_cast<uint8_t>(std::min(v, 255u)));
    }
  } else {
    for (size_t i = 0; i < count; ++i) std::memcpy(&image.rgb[3 * i], &pixels[4 * i], 3);
  }
  return image;
}

}  // namespace rocket
