// The text model's multimodal rotary positions for a prompt with images, as the reference assigns them
// (transformers' Qwen3_5MoeModel.get_rope_index and get_vision_position_ids, docs/vision-tower.md, "The text side").
//
// The prompt splits into runs: text tokens, and the runs of image_pad tokens (one per image, its
// `t · (h/merge) · (w/merge)` merged patches; the template puts <|vision_start|> and <|vision_end|>,
// text tokens, around each). With `next` the position the run starts at (0 first):
//  - a text run of n tokens takes next, next+1, … on all three axes, and next grows by n;
//  - an image run takes, for merged patch (f, r, c) in frame-major, row-major order,
//    (next + f, next + r, next + c), and next grows by max(h, w) / merge (not by the run's length).
// The sequence's rope delta is max(position) + 1 − tokens: the token at index i ≥ tokens (every decoded
// one) sits at i + delta on all three axes. A text-only prompt has positions 0…n−1 and delta 0.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/host/attention.h"
#include "vision/tower_positions.h"

namespace rocket::vision {

struct MropePositions {
  std::vector<host::MropePosition> positions;  // one per prompt token
  int64_t delta = 0;                           // rope delta: position of token i >= tokens is i + delta
};

// Positions for `tokens`, whose image_pad runs (`image_token`) are the images of `grids` in order.
// Error when a run's length is not its image's merged-patch count (two images must be apart: the
// reference groups adjacent image tokens into one run), when runs and grids differ in number, or a grid
// is not a positive multiple of `merge` in h and w.
MropePositions mrope_positions(std::span<const int32_t> tokens, int32_t image_token,
                               std::span<const ImageGrid> grids, int merge);

// The position of the token at index `index` past a prompt whose rope delta is `delta`.
inline host::MropePosition mrope_after_prompt(int64_t index, int64_t delta) {
  return host::MropePosition::text(index + delta);
}

}  // namespace rocket::vision
