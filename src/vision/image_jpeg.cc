// JPEG through libjpeg-turbo, with the library's defaults PIL decodes with (islow DCT, fancy
// upsampling), so the pixels are PIL's on the same libjpeg. libjpeg's error_exit must not return:
// it longjmps back into the C-style phase that called the library, and the C++ caller, which owns
// the decompressor, throws.
#include <cstdio>
// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <cstring>

#include <fmt/format.h>

#include "vision/image_codecs.h"
#include "vision/image_error.h"

namespace rocket {
namespace {

// A progressive JPEG may hold any number of scans, each a pass over the whole image; real encoders
// write about ten. Bound them, or a small file costs seconds of decoding.
constexpr int kJpegMaxScans = 256;

struct JpegErrors {
  jpeg_error_mgr mgr;  // first: libjpeg hands back a pointer to it as j_common_ptr->err
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_on_error(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings (level -1) are corrupt data libjpeg works around, as PIL lets it; except running out of
// data, which PIL refuses as a truncated image and libjpeg would paint gray.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(errors->message, sizeof errors->message, "the JPEG data ends early (truncated)");
    std::longjmp(errors->jump, 1);
  }
  if (level < 0) cinfo->err->num_warnings++;
}

void jpeg_on_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kJpegMaxScans) {
    auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(errors->message, sizeof errors->message, "the progressive JPEG has over %d scans", kJpegMaxScans);
    std::longjmp(errors->jump, 1);
  }
}

// Owns the decompressor; destroyed on every path, after any longjmp has landed.
struct JpegHandle {
  jpeg_decompress_struct cinfo{};
  JpegErrors errors{};
  jpeg_progress_mgr progress{};
  bool created = false;
  JpegHandle() = default;
  JpegHandle(const JpegHandle&) = delete;
  JpegHandle& operator=(const JpegHandle&) = delete;
  ~JpegHandle() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

// Phase 1: create, read the header and the APP1 markers. `max_memory` bounds libjpeg's own
// allocations (a progressive image keeps every coefficient).
bool jpeg_read_head(JpegHandle& h, std::span<const uint8_t> bytes, long max_memory) {
  h.cinfo.err = jpeg_std_error(&h.errors.mgr);
  h.errors.mgr.error_exit = jpeg_on_error;
  h.errors.mgr.emit_message = jpeg_on_message;
  if (setjmp(h.errors.jump)) return false;
  jpeg_create_decompress(&h.cinfo);
  h.created = true;
  h.cinfo.mem->max_memory_to_use = max_memory;
  h.progress.progress_monitor = jpeg_on_progress;
  h.cinfo.progress = &h.progress;
  jpeg_mem_src(&h.cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(&h.cinfo, JPEG_APP0 + 1, 0xffff);
  jpeg_read_header(&h.cinfo, TRUE);
  return true;
}

// Phase 2: decompress into `rgb` (width × height × 3 bytes, allocated by the caller).
bool jpeg_read_pixels(JpegHandle& h, uint8_t* rgb) {
  if (setjmp(h.errors.jump)) return false;
  h.cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&h.cinfo);
  if (h.cinfo.output_components != 3) {
    std::snprintf(h.errors.message, sizeof h.errors.message, "libjpeg gave %d components, not RGB", h.cinfo.output_components);
    return false;
  }
  const size_t stride = size_t{h.cinfo.output_width} * 3;
  while (h.cinfo.output_scanline < h.cinfo.output_height) {
    JSAMPROW row = rgb + h.cinfo.output_scanline * stride;
    jpeg_read_scanlines(&h.cinfo, &row, 1);
  }
  // The image is whole; what follows its last scan is not read (PIL does not read it either).
  jpeg_abort_decompress(&h.cinfo);
  return true;
}

[[noreturn]] void jpeg_failed(const JpegHandle& h) {
  throw ImageError(ImageError::Kind::malformed, fmt::format("the JPEG image cannot be decoded: {}", h.errors.message));
}

}  // namespace

RgbImage decode_jpeg(std::span<const uint8_t> bytes, uint64_t max_pixels, int& orientation) {
  JpegHandle h;
  // Six bytes a pixel covers the coefficients of a progressive 4:4:4 image (two bytes per
  // coefficient, three components) beside libjpeg's row buffers; the pixel bound comes first anyway.
  const uint64_t max_memory = std::min<uint64_t>(max_pixels * 6 + (uint64_t{16} << 20), uint64_t{1} << 40);
  if (!jpeg_read_head(h, bytes, static_cast<long>(max_memory))) jpeg_failed(h);
  check_pixel_bound("JPEG", h.cinfo.image_width, h.cinfo.image_height, max_pixels);
  if (h.cinfo.jpeg_color_space == JCS_CMYK || h.cinfo.jpeg_color_space == JCS_YCCK)
    throw ImageError(ImageError::Kind::malformed, "CMYK JPEG images are not supported; send an RGB or grayscale JPEG, or a PNG");

  orientation = 1;
  for (jpeg_saved_marker_ptr m = h.cinfo.marker_list; m; m = m->next) {
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0) {
      orientation = exif_orientation({m->data, m->data_length});
      break;
    }
  }

  RgbImage image{static_cast<int>(h.cinfo.image_width), static_cast<int>(h.cinfo.image_height), {}};
  image.rgb.resize(size_t{h.cinfo.image_width} * h.cinfo.image_height * 3);
  if (!jpeg_read_pixels(h, image.rgb.data())) jpeg_failed(h);
  return image;
}

}  // namespace rocket
