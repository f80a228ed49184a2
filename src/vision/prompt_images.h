// A prompt's images as an engine takes them (BatchEngine::set_images): the image processor's patches
// of every image, one image after another, and each image's grid. The prompt's runs of image_pad
// tokens are these images in order, one token per merged patch (mrope_positions.h).
#pragma once

#include <vector>

#include "vision/tower_positions.h"

namespace rocket::vision {

struct PromptImages {
  std::vector<float> patches;    // [Σ grids' t·h·w][patch_dim], tower_positions.h's patch order
  std::vector<ImageGrid> grids;  // one per image, in prompt order
  bool empty() const { return grids.empty(); }
};

}  // namespace rocket::vision
