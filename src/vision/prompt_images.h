// A prompt's images as an engine takes them (BatchEngine::set_images): the image processor's patches
// of every image, one image after another, and each image's grid. The prompt's runs of image_pad
// tokens are these images in order, one token per merged patch (mrope_positions.h).
#pragma once

#include <vector>

#include "vision/image_hash.h"
#include "vision/tower_positions.h"

namespace rocket::vision {

struct PromptImages {
  std::vector<float> patches;    // [Σ grids' t·h·w][patch_dim], tower_positions.h's patch order
  std::vector<ImageGrid> grids;  // one per image, in prompt order
  // One per image where known (the scheduler's: the SHA-256 of the bytes the client sent), else empty:
  // an engine may keep an image's encoded rows under it (the H200's encoder cache, h200_images.h); the
  // same bytes give the same patches under one plan's processor, so the same rows.
  std::vector<ImageDigest> digests;
  bool empty() const { return grids.empty(); }
};

}  // namespace rocket::vision
