// WebP through libwebp, which reports errors by status code: no longjmp to contain. A still image
// decodes as PIL's WebP plugin gives it (the RGB samples; alpha dropped by convert("RGB")); an
// animation is refused rather than cut to its first frame silently.
#include <webp/decode.h>
#include <webp/demux.h>

#include <fmt/format.h>

#include "vision/image_codecs.h"
#include "vision/image_error.h"

namespace rocket {
namespace {

// The EXIF chunk of an extended (VP8X) file, through libwebp's demuxer; 1 when there is none.
int webp_orientation(std::span<const uint8_t> bytes) {
  const WebPData data{bytes.data(), bytes.size()};
  WebPDemuxer* demux = WebPDemux(&data);
  if (!demux) return 1;
  int orientation = 1;
  WebPChunkIterator chunk;
  if (WebPDemuxGetChunk(demux, "EXIF", 1, &chunk)) {
    orientation = exif_orientation({chunk.chunk.bytes, chunk.chunk.size});
    WebPDemuxReleaseChunkIterator(&chunk);
  }
  WebPDemuxDelete(demux);
  return orientation;
}

}  // namespace

RgbImage decode_webp(std::span<const uint8_t> bytes, uint64_t max_pixels, int& orientation) {
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (status != VP8_STATUS_OK)
    throw ImageError(ImageError::Kind::malformed,
                     fmt::format("the WebP image cannot be decoded: {}",
                                 status == VP8_STATUS_NOT_ENOUGH_DATA ? "the data ends early (truncated)" : "its header is invalid"));
  if (features.has_animation)
    throw ImageError(ImageError::Kind::malformed, "animated WebP images are not supported; send a still image");
  check_pixel_bound("WebP", static_cast<uint64_t>(features.width), static_cast<uint64_t>(features.height), max_pixels);

  RgbImage image{features.width, features.height, {}};
  image.rgb.resize(size_t(features.width) * size_t(features.height) * 3);
  if (!WebPDecodeRGBInto(bytes.data(), bytes.size(), image.rgb.data(), image.rgb.size(), features.width * 3))
    throw ImageError(ImageError::Kind::malformed, "the WebP image cannot be decoded: its data is corrupt or truncated");
  orientation = webp_orientation(bytes);
  return image;
}

}  // namespace rocket
