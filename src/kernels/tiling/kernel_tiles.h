// What the plan records of one kernel at one bucket: its launch (grid, block, shared memory) and the
// tile parameters it was compiled with, by name. Each tiling header summarises its choice as one of
// these; the compiler writes them into plan.json and engine.h, and the H200 engine static_asserts
// its kernels' traits equal to them, so a drift between compiler and kernels fails the engine build.
#pragma once

#include <cstdint>

namespace rocket::tiling {

struct TileParam {
  const char* name = "";
  int64_t value = 0;
};

struct KernelTiles {
  static constexpr int kMaxParams = 12;
  int64_t grid = 0;        // blocks
  int threads = 0;         // per block
  int smem_bytes = 0;      // shared memory per block, static or dynamic
  int params = 0;
  TileParam param[kMaxParams] = {};

  constexpr KernelTiles with(const char* name, int64_t value) const {
    KernelTiles t = *this;
    t.param[t.params++] = {name, value};
    return t;
  }
};

constexpr bool same_name(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

// Same launch and the same parameters, in any order.
constexpr bool operator==(const KernelTiles& a, const KernelTiles& b) {
  if (a.grid != b.grid || a.threads != b.threads || a.smem_bytes != b.smem_bytes || a.params != b.params) return false;
  for (int i = 0; i < a.params; ++i) {
    bool found = false;
    for (int j = 0; j < b.params; ++j)
      if (same_name(a.param[i].name, b.param[j].name)) found = a.param[i].value == b.param[j].value;
    if (!found) return false;
  }
  return true;
}

}  // namespace rocket::tiling
