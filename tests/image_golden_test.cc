// src/vision's decode and preprocess against the HF reference's image processor on the same files:
// tests/golden/vision_processor.json (tools/reference/image_golden.py on the GPU machine: PIL load with EXIF
// transpose, Qwen2VLImageProcessor with the Qwen3.5 values) holds each image file, the processor's
// grid and its pixel_values as 8-bit levels. Ours must give the same grid and the same levels, every
// one: the reference's resize is integer arithmetic on 8-bit pixels (image_resize.h), so there is no
// rounding left to tolerate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "vision/data_url.h"
#include "vision/image_decode.h"
#include "vision/image_processor.h"

namespace rocket {
namespace {

nlohmann::json golden() {
  std::ifstream f(test::test_data() + "/golden/vision_processor.json");
  return nlohmann::json::parse(f);
}

// Our pixel_values as the levels they normalise: v = (level / 255 - 0.5) / 0.5.
std::vector<uint8_t> levels_of(const PixelPatches& p) {
  std::vector<uint8_t> out(p.values.size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = uint8_t(std::clamp(std::lround((double(p.values[i]) * 0.5 + 0.5) * 255.0), 0L, 255L));
  return out;
}

TEST(ImageGolden, DecodeAndPreprocessGiveTheReferencesLevels) {
  const nlohmann::json g = golden();
  ASSERT_GE(g.at("cases").size(), 10u);
  for (const auto& c : g.at("cases")) {
    const std::string name = c.at("name");
    const std::vector<uint8_t> bytes = decode_base64(c.at("bytes_base64").get<std::string>());
    const RgbImage image = decode_image(bytes);
    EXPECT_EQ(image.width, c.at("loaded_wh")[0].get<int>()) << name;
    EXPECT_EQ(image.height, c.at("loaded_wh")[1].get<int>()) << name;
    VisionProcessorConfig config;
    config.min_pixels = c.at("size").at("shortest_edge");
    config.max_pixels = c.at("size").at("longest_edge");
    const PixelPatches p = preprocess_image(image, config);
    EXPECT_EQ((std::vector<int64_t>{p.grid_t, p.grid_h, p.grid_w}), c.at("grid_thw").get<std::vector<int64_t>>()) << name;
    ASSERT_EQ(int64_t(p.values.size()), c.at("shape")[0].get<int64_t>() * c.at("shape")[1].get<int64_t>()) << name;
    const std::vector<uint8_t> ours = levels_of(p);
    // Every level, or where the golden keeps a sample, every 13th.
    std::vector<uint8_t> want, got;
    if (c.contains("levels_base64")) {
      want = decode_base64(c.at("levels_base64").get<std::string>());
      got = ours;
    } else {
      want = decode_base64(c.at("levels_every_13th_base64").get<std::string>());
      for (size_t i = 0; i < ours.size(); i += 13) got.push_back(ours[i]);
    }
    ASSERT_EQ(got.size(), want.size()) << name;
    size_t differ = 0, first = got.size();
    int worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[i]) {
        ++differ;
        first = std::min(first, i);
        worst = std::max(worst, std::abs(int(got[i]) - int(want[i])));
      }
    EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << got.size() << " levels differ (worst by " << worst
                          << ", first at " << first << ")";
  }
}

}  // namespace
}  // namespace rocket
