// The text model's multimodal rotary: positions of prompts with images (vision/mrope_positions.h) and the
// host rotary at 3-D positions (kernels/host/attention.h), against examples worked by hand from the
// reference's get_rope_index and recomposition_frequencies (docs/vision-tower.md, "The text side").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "core/error.h"
#include "kernels/host/attention.h"
#include "vision/mrope_positions.h"

namespace rocket {
namespace {

using host::MropePosition;
using vision::ImageGrid;

constexpr int32_t kPad = 248056, kStart = 248053, kEnd = 248054;  // image_pad, vision_start, vision_end

std::vector<float> random_vec(std::mt19937& rng, int n) {
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<int32_t> with_images(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
std::vector<int32_t> pads(int n) { return std::vector<int32_t>(size_t(n), kPad); }

TEST(MropePositions, TextOnlyIsTheOneDimensionalPositions) {
  const std::vector<int32_t> tokens{5, 9, 9, 1, 70000, 3};
  const auto m = vision::mrope_positions(tokens, kPad, {}, 2);
  ASSERT_EQ(m.positions.size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(m.positions[i], MropePosition::text(int64_t(i))) << i;
  EXPECT_EQ(m.delta, 0);
  EXPECT_EQ(vision::mrope_after_prompt(6, m.delta), MropePosition::text(6));
}

TEST(MropePositions, OneImageByHand) {
  // Grid [1, 4, 6] merges to 2 x 3: six image tokens. Text 0, 1, vision_start 2; the image starts at 3:
  // time 3, rows 3..4, columns 3..5; then next = 3 + max(4, 6)/2 = 6: vision_end 6, the last token 7.
  // delta = max + 1 - tokens = 8 - 11 = -3.
  const auto tokens = with_images({{100, 101, kStart}, pads(6), {kEnd, 102}});
  const std::vector<ImageGrid> grids{{1, 4, 6}};
  const auto m = vision::mrope_positions(tokens, kPad, grids, 2);
  const std::vector<MropePosition> want{{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {3, 3, 4}, {3, 3, 5},
                                        {3, 4, 3}, {3, 4, 4}, {3, 4, 5}, {6, 6, 6}, {7, 7, 7}};
  EXPECT_EQ(m.positions, want);
  EXPECT_EQ(m.delta, -3);
  // The first decoded token (index 11) continues at 8 on every axis.
  EXPECT_EQ(vision::mrope_after_prompt(11, m.delta), MropePosition::text(8));
}

TEST(MropePositions, TwoImagesByHand) {
  // [1, 2, 2]: one token at 1; next = 1 + 1 = 2. [1, 6, 2]: 3 x 1 tokens from 4 (rows 4..6, column 4);
  // next = 4 + 3 = 7. The last token 8; max 8 + 1 - 9 tokens: delta 0 (a one-column image adds none).
  const auto tokens = with_images({{kStart}, pads(1), {kEnd, kStart}, pads(3), {kEnd, 7}});
  const std::vector<ImageGrid> grids{{1, 2, 2}, {1, 6, 2}};
  const auto m = vision::mrope_positions(tokens, kPad, grids, 2);
  const std::vector<MropePosition> want{{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {4, 4, 4},
                                        {4, 5, 4}, {4, 6, 4}, {7, 7, 7}, {8, 8, 8}};
  EXPECT_EQ(m.positions, want);
  EXPECT_EQ(m.delta, 0);
}

TEST(MropePositions, ImageEndingThePromptAndFrames) {
  // [1, 4, 4] at the end: 2 x 2 tokens from 1; max 2, delta 3 - 5 = -2.
  {
    const auto tokens = with_images({{42}, pads(4)});
    const std::vector<ImageGrid> grids{{1, 4, 4}};
    const auto m = vision::mrope_positions(tokens, kPad, grids, 2);
    const std::vector<MropePosition> want{{0, 0, 0}, {1, 1, 1}, {1, 1, 2}, {1, 2, 1}, {1, 2, 2}};
    EXPECT_EQ(m.positions, want);
    EXPECT_EQ(m.delta, -2);
  }
  // Two frames [2, 2, 2]: time 1 and 2 at row 1, column 1; next grows by max(h, w)/2 = 1 only, so the
  // last token sits at 2 beside the second frame's time; max 2, delta 3 - 4 = -1.
  {
    const auto tokens = with_images({{42}, pads(2), {43}});
    const std::vector<ImageGrid> grids{{2, 2, 2}};
    const auto m = vision::mrope_positions(tokens, kPad, grids, 2);
    const std::vector<MropePosition> want{{0, 0, 0}, {1, 1, 1}, {2, 1, 1}, {2, 2, 2}};
    EXPECT_EQ(m.positions, want);
    EXPECT_EQ(m.delta, -1);
  }
}

TEST(MropePositions, RefusesRunsThatAreNotTheirImages) {
  const std::vector<ImageGrid> one{{1, 4, 4}}, two{{1, 2, 2}, {1, 2, 2}};
  // Too few tokens for the grid.
  EXPECT_THROW(vision::mrope_positions(with_images({{1}, pads(3), {2}}), kPad, one, 2), Error);
  // Two images with nothing between them are one run (as the reference groups them).
  EXPECT_THROW(vision::mrope_positions(with_images({{1}, pads(2), {2}}), kPad, two, 2), Error);
  // A run without an image, and an image without a run.
  EXPECT_THROW(vision::mrope_positions(with_images({{1}, pads(4), {2}, pads(4)}), kPad, one, 2), Error);
  EXPECT_THROW(vision::mrope_positions(with_images({{1}, pads(1), {2}}), kPad, two, 2), Error);
  // A grid that does not merge.
  const std::vector<ImageGrid> odd{{1, 3, 4}};
  EXPECT_THROW(vision::mrope_positions(with_images({{1}, pads(3), {2}}), kPad, odd, 2), Error);
}

// Today's text rotary, written out once more as the HF recipe computes it in fp32: the multimodal form at
// a text position must give these bits.
void text_rope_recipe(float* x, int heads, int hd, int rot, int64_t pos, double theta) {
  const int half = rot / 2;
  for (int h = 0; h < heads; ++h) {
    float* v = x + h * hd;
    for (int i = 0; i < half; ++i) {
      const float inv_freq = 1.0f / std::pow(float(theta), float(2 * i) / float(rot));
      const float angle = float(pos) * inv_freq;
      const float c = std::cos(angle), s = std::sin(angle);
      const float a = v[i], b = v[i + half];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }
}

TEST(HostMrope, TextPositionsGiveTheTextRotaryBits) {
  std::mt19937 rng(43);
  const host::MropeSection sections[] = {host::kMropeSection, {2, 1, 1}, {0, 0, 0}};
  for (int rot : {8, 16, 64}) {
    for (int64_t pos : {int64_t(0), int64_t(1), int64_t(37), int64_t(4095), int64_t(262143)}) {
      const auto x = random_vec(rng, 3 * 256);
      auto want = x;
      text_rope_recipe(want.data(), 3, 256, rot, pos, 1e7);
      auto rope = x;
      host::apply_rope(rope.data(), 3, 256, rot, pos, 1e7);
      EXPECT_EQ(rope, want) << "rot " << rot << " pos " << pos;
      for (const auto& s : sections) {
        auto m = x;
        host::apply_mrope(m.data(), 3, 256, rot, MropePosition::text(pos), 1e7, s);
        EXPECT_EQ(m, want) << "rot " << rot << " pos " << pos << " section " << s[0] << s[1] << s[2];
      }
    }
  }
}

// Which frequencies (pairs) rotate with which axis, worked by hand from recomposition_frequencies:
// frequency i takes height where i % 3 == 1 and i < 3·section[1], width where i % 3 == 2 and
// i < 3·section[2], time elsewhere.
struct Layout {
  int rot;
  host::MropeSection section;
  std::set<int> t, h, w;
};

TEST(HostMrope, SectionLayoutByHand) {
  const Layout layouts[] = {
      // The published a3b: head_dim 256, partial 0.25, half 32.
      {64, {11, 11, 10}, {0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30}, {1, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31},
       {2, 5, 8, 11, 14, 17, 20, 23, 26, 29}},
      // The tiny fuel: head_dim 32, partial 0.25, half 4.
      {8, {11, 11, 10}, {0, 3}, {1}, {2}},
      // A short section: height and width take one frequency each.
      {8, {2, 1, 1}, {0, 3}, {1}, {2}},
      // No height or width frequencies: all time.
      {8, {4, 0, 0}, {0, 1, 2, 3}, {}, {}},
  };
  std::mt19937 rng(44);
  const int heads = 2, hd = 64;
  const MropePosition p{3, 70, 1100};
  for (const auto& L : layouts) {
    const int half = L.rot / 2;
    const auto x = random_vec(rng, heads * hd);
    auto got = x;
    host::apply_mrope(got.data(), heads, hd, L.rot, p, 1e7, L.section);
    // Each axis's own 1-D rotary; pair i must carry the bits of its axis's.
    auto at_t = x, at_h = x, at_w = x;
    host::apply_rope(at_t.data(), heads, hd, L.rot, p.t, 1e7);
    host::apply_rope(at_h.data(), heads, hd, L.rot, p.h, 1e7);
    host::apply_rope(at_w.data(), heads, hd, L.rot, p.w, 1e7);
    ASSERT_EQ(L.t.size() + L.h.size() + L.w.size(), size_t(half));
    for (int hh = 0; hh < heads; ++hh) {
      for (int i = 0; i < half; ++i) {
        const auto& want = L.h.count(i) ? at_h : L.w.count(i) ? at_w : at_t;
        ASSERT_TRUE(L.t.count(i) + L.h.count(i) + L.w.count(i) == 1) << i;
        for (int d : {i, i + half}) EXPECT_EQ(got[hh * hd + d], want[hh * hd + d]) << "rot " << L.rot << " dim " << d;
      }
      for (int d = L.rot; d < hd; ++d) EXPECT_EQ(got[hh * hd + d], x[hh * hd + d]) << d;
    }
    // The three axes differ, so a layout that mixed them up would fail above; make sure they do here.
    EXPECT_NE(at_h[1], at_w[1]);
  }
}

}  // namespace
}  // namespace rocket
