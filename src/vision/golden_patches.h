// The deterministic patch values the vision goldens feed the HF reference (tools/reference/vision_golden.py
// patch_values, also used by prompt_image_golden.py): value i of seed `which` is 16 bits of a 32-bit hash
// of (which, i), over 32768, less 1 — exact in FP32, so the tower's input is the same bits on both sides.
// The host tower's parity test and `rocket-engine imagecheck --golden` compute them here.
#pragma once

#include <cstdint>
#include <vector>

namespace rocket::vision {

inline std::vector<float> golden_patch_values(uint32_t which, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    uint32_t z = which * 0x9E3779B1u + uint32_t(i) * 0x85EBCA77u + 0x165667B1u;
    z ^= z >> 15;
    z *= 0x2C1B3C6Du;
    z ^= z >> 12;
    z *= 0x297A2D39u;
    z ^= z >> 15;
    v[size_t(i)] = float((z >> 8) & 0xffffu) / 32768.0f - 1.0f;
  }
  return v;
}

}  // namespace rocket::vision
