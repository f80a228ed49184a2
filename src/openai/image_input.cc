#include "openai/image_input.h"

#include <fmt/format.h>

#include "openai/protocol_error.h"
#include "vision/data_url.h"
#include "vision/image_error.h"

namespace rocket {

bool accepted_image_media_type(std::string_view media_type) {
  // image/jpg is not registered, but clients write it (and PIL opens the bytes whatever it says).
  for (std::string_view t : {"image/png", "image/jpeg", "image/jpg", "image/webp"})
    if (media_type == t) return true;
  return false;
}

ImageInput image_from_url(std::string_view url, const std::string& param, const ImageBounds& bounds) {
  ImageInput image;
  image.param = param;
  try {
    DataUrl data = parse_data_url(url, bounds.max_bytes);
    image.media_type = std::move(data.media_type);
    image.bytes = std::move(data.bytes);
  } catch (const ImageError& e) {
    const bool bound = e.http_status() == 413;
    throw ProtocolError(e.http_status(), fmt::format("Invalid image in '{}': {}.", param, e.what()), param,
                        "invalid_request_error",
                        bound ? "image_too_large" : "invalid_image_url");
  }
  if (!accepted_image_media_type(image.media_type))
    throw ProtocolError(400,
                        fmt::format("Invalid image in '{}': the media type '{}' is not one this server reads; send "
                                    "image/png, image/jpeg or image/webp.",
                                    param, image.media_type.empty() ? std::string("(none)") : image.media_type),
                        param, "invalid_request_error", "invalid_image_format");
  return image;
}

}  // namespace rocket
