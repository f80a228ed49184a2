// Images in the APIs' requests (issue 43): an OpenAI `image_url` content part, a Responses
// `input_image` part and an Anthropic `image` block all come down to a `data:` URL, which the request
// parser decodes here into the image's bytes (docs/images.md: what is accepted, and what becomes of
// the bytes before the tower). Pixels are decoded later, by the prompt builder.
//
// Refusals are ProtocolErrors naming the part: a remote URL (Rocket fetches nothing), a declared media
// type other than PNG, JPEG or WebP, malformed base64 or data URL (400); more images than the server's
// bound (400); an image over the server's byte bound (413).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rocket {

// The server's bounds on a request's images (`rocket launch --max-images`, `--max-image-bytes`).
struct ImageBounds {
  int max_images = 16;                     // per request, every message counted
  size_t max_bytes = size_t{20} << 20;     // per image, after base64 (ImageLimits' default)
};

// One image of a request, in the order the conversation sends them.
struct ImageInput {
  std::string media_type;      // as declared, lower-cased ("image/png"); the decoder trusts the bytes
  std::vector<uint8_t> bytes;  // the data URL's payload
  std::string param;           // the part it came from ("messages[1].content[2]"), for later errors
};

// The media types a client may declare; the bytes' magic still decides the codec.
bool accepted_image_media_type(std::string_view media_type);

// Decodes a client's image URL. Throws ProtocolError (400, or 413 over bounds.max_bytes) naming
// `param` on anything but a data: URL of an accepted media type.
ImageInput image_from_url(std::string_view url, const std::string& param, const ImageBounds& bounds);

}  // namespace rocket
