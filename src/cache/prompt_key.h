// PromptKey: what the prefix cache keys a prompt by. The engine runs the prompt's token ids; the
// cache (RadixCache, StreamPages) is handed this key instead, so that a prompt's images take part
// in it by their content (docs/images.md, "In the scheduler").
//
// Every image token of every image is the same id (<|image_pad|>), so ids alone would let one
// image's cached state serve another's tokens. The key is the ids with each image's run of pads
// replaced by values derived from its SHA-256 digest (vision/image_hash.h): negative, so never a
// vocabulary id (ids are >= 0), and per position within the image (token i of the run carries 31
// bits of the digest's 32-bit word i mod 8, mixed with i / 8). Text ids are the key unchanged. The
// same bytes sent again give the same digest, the same patches and grid (the processor's rules are
// the server's), so the same tokens and positions: a prompt that resends an image resumes past it,
// and a different image at the same place shares nothing from its first image token on.
//
// A cache entry ending j tokens into an image is keyed by only j of its key tokens, 31·j bits of
// the digest: too few to stand for the image when j is small. So no boundary inside an image's
// first kDigestTokens tokens (or inside the whole image when it has fewer) is held: the scheduler
// neither captures a state there nor resumes from one (holds()). Every other boundary, inside an
// image too, is one the engine can resume from: it sets the whole prompt's images and positions
// (BatchEngine::set_images) and takes the embeddings of the rows it still computes.
//
// Thread safety: a value; immutable once built.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vision/image_hash.h"

namespace rocket {

// One image of a prompt, as the cache keys it.
struct KeyedImage {
  int64_t first_token = 0;  // index of its first image token in the prompt's ids
  int64_t tokens = 0;       // its run of image tokens (the processor's vision_tokens)
  ImageDigest digest;       // SHA-256 of the bytes the client sent
};

struct PromptKey {
  // 256 bits of digest, 31 a token: a boundary holds an image once 8 of its tokens precede it.
  static constexpr int kDigestTokens = 8;
  // A half-open range (after, below) of boundaries the cache holds no state at.
  struct Unheld {
    int after = 0, below = 0;  // boundaries b with after < b < below
  };

  std::vector<int32_t> tokens;  // the ids, each image's tokens replaced by its key values
  std::vector<Unheld> unheld;   // one per image, in prompt order

  // A text prompt: its ids are its key, every boundary held.
  static PromptKey of_text(std::span<const int32_t> ids);
  // REQUIRES (Error otherwise): images in prompt order, not overlapping, inside ids, each a run of
  // one id (the image token) of at least one token.
  static PromptKey of(std::span<const int32_t> ids, std::span<const KeyedImage> images);

  // Whether the cache may hold a state at `boundary` (capture it, resume from it).
  bool holds(int boundary) const;
  // The deepest multiple of `page` at or before `boundary` that holds (0 always does).
  int held_page_at_or_before(int boundary, int page) const;
};

// Token i of an image's run in the key: negative, from the digest's word i mod 8 and i / 8.
int32_t image_key_token(const ImageDigest& digest, int64_t i);

}  // namespace rocket
