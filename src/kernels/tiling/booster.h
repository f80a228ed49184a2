// The booster constants kernel tiling depends on, as the hardware profile measured them
// (boosters/*.json: sm_count, smem_per_block_optin, l2_bytes). The compiler reads them from the
// profile, records them in the plan and writes them into engine.h; the kernels' traits take them
// from there (kernels/cuda/booster.cuh). Plain C++: g++ (the compiler) and nvcc (the kernels) both
// include this folder.
#pragma once

#include <cstdint>

namespace rocket::tiling {

struct BoosterLimits {
  int sms = 0;                 // streaming multiprocessors
  int smem_per_block = 0;      // shared memory per block with opt-in, bytes
  uint64_t l2_bytes = 0;
  constexpr bool operator==(const BoosterLimits&) const = default;
};

constexpr int min(int a, int b) { return a < b ? a : b; }
constexpr int max(int a, int b) { return a > b ? a : b; }
constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace rocket::tiling
