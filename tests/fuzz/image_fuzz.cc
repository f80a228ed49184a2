// A client's image as the APIs will hand it over: a data: URL (when the input starts with "data:")
// or raw bytes, decoded as PNG, JPEG or WebP, then resized and cut into patches as the reference
// processor does. Every refusal is an ImageError; a crash, a sanitizer report, a longjmp gone wrong
// or a codec's abort() is a finding. The bounds are small so that each input stays fast: a header
// can claim any size, and the pixel bound is what stops it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vision/data_url.h"
#include "vision/image_decode.h"
#include "vision/image_error.h"
#include "vision/image_processor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const rocket::ImageLimits limits{.max_bytes = size_t{1} << 20, .max_pixels = uint64_t{1} << 20};
  rocket::VisionProcessorConfig config;
  config.min_pixels = 32 * 32;
  config.max_pixels = 256 * 256;
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    rocket::RgbImage image;
    if (text.starts_with("data:")) {
      const rocket::DataUrl url = rocket::parse_data_url(text, limits.max_bytes);
      image = rocket::decode_image(url.bytes, limits);
    } else {
      image = rocket::decode_image({data, size}, limits);
    }
    const rocket::PixelPatches patches = rocket::preprocess_image(image, config);
    volatile float sum = 0;
    for (size_t i = 0; i < patches.values.size(); i += 97) sum = sum + patches.values[i];
  } catch (const rocket::ImageError&) {
  }
  return 0;
}
