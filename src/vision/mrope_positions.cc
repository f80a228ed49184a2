#include "vision/mrope_positions.h"

#include <algorithm>

#include "core/error.h"

namespace rocket::vision {

MropePositions mrope_positions(std::span<const int32_t> tokens, int32_t image_token,
                               std::span<const ImageGrid> grids, int merge) {
  CHECK(merge >= 1, "spatial merge must be positive");
  MropePositions out;
  out.positions.reserve(tokens.size());
  int64_t next = 0, max_pos = -1;
  size_t image = 0;
  for (size_t i = 0; i < tokens.size();) {
    size_t end = i;
    const bool is_image = tokens[i] == image_token;
    while (end < tokens.size() && (tokens[end] == image_token) == is_image) ++end;
    const int64_t run = int64_t(end - i);
    if (!is_image) {
      for (int64_t k = 0; k < run; ++k) out.positions.push_back(host::MropePosition::text(next + k));
      next += run;
      max_pos = std::max(max_pos, next - 1);
    } else {
      if (image >= grids.size())
        fail("image tokens at {}: the prompt has more image runs than its {} image(s)", i, grids.size());
      const ImageGrid& g = grids[image];
      if (g.t < 1 || g.h < merge || g.w < merge || g.h % merge || g.w % merge)
        fail("image {}: grid [{}, {}, {}] is not positive multiples of the merge {}", image, g.t, g.h, g.w, merge);
      const int gh = g.h / merge, gw = g.w / merge;
      const int64_t want = int64_t(g.t) * gh * gw;
      if (run != want)
        fail("image {}: {} image tokens at {} where its grid [{}, {}, {}] needs {}", image, run, i, g.t, g.h, g.w,
             want);
      for (int f = 0; f < g.t; ++f)
        for (int r = 0; r < gh; ++r)
          for (int c = 0; c < gw; ++c) out.positions.push_back({next + f, next + r, next + c});
      max_pos = std::max(max_pos, next + std::max({g.t - 1, gh - 1, gw - 1}));
      next += std::max(g.h, g.w) / merge;
      ++image;
    }
    i = end;
  }
  if (image != grids.size()) fail("the prompt has {} image run(s) for {} image(s)", image, grids.size());
  out.delta = max_pos + 1 - int64_t(tokens.size());
  return out;
}

}  // namespace rocket::vision
