// A client's image that Rocket refuses: a URL it does not fetch, bytes that are not a PNG, JPEG or
// WebP it can decode, or an image over a bound. Thrown by everything in src/vision that reads client
// bytes; the APIs turn it into their 400 (or 413 for a bound) and name the content part.
//
// It derives from Error so that a boundary that only knows Error still shows the message. Decoders
// never let a codec's own error handling (libpng's and libjpeg's longjmp, abort-on-error defaults)
// reach C++ frames: they catch it inside a C-style frame and throw this from the caller.
#pragma once

#include <string>

#include "core/error.h"

namespace rocket {

class ImageError : public Error {
 public:
  enum class Kind {
    refused,    // a URL scheme not fetched, a data: URL that is not one
    malformed,  // bad base64, unknown magic, truncated or corrupt image data, an unsupported variant,
                // a shape the reference processor refuses (an aspect ratio over 200)
    too_large,  // over the byte bound or the pixel bound (checked before any pixel is decoded)
  };

  ImageError(Kind kind, const std::string& message) : Error(message), kind_(kind) {}

  Kind kind() const { return kind_; }
  // The HTTP status the APIs answer with: 413 for a bound, 400 for everything else.
  int http_status() const { return kind_ == Kind::too_large ? 413 : 400; }

 private:
  Kind kind_;
};

}  // namespace rocket
