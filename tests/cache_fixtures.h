// Shared by the cache tests: a small geometry and token sequences.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

#include "cache/geometry.h"

namespace rocket::test {

constexpr int kP = 4;  // tokens per page in these tests

inline CacheGeometry small_geometry(int pages = 32, int snapshots = 8, int max_context = 64) {
  return {.page_tokens = kP, .pages = pages, .layer_pages = 2, .layer_page_bytes = 64 * 1024,
          .snapshot_slots = snapshots, .snapshot_bytes = 64 * 1024, .max_context = max_context};
}

inline std::vector<int32_t> seq(int32_t first, int n) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

}  // namespace rocket::test
