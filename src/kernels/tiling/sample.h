// Tiling of the sampler (kernels/cuda/sample.cuh): one cluster of blocks per row, each block a slice
// of the vocabulary in shared memory plus block 0's candidate buffer.
#pragma once

#include "kernels/tiling/booster.h"
#include "kernels/tiling/kernel_tiles.h"

namespace rocket::tiling {

struct SampleTiling {
  int blocks = 0;      // cluster per row
  int threads = 0, warps = 0;
  int per_thread = 0;  // elements per thread, odd so that threads reading their own chunks hit distinct banks
  int slice = 0;       // elements per block
  int candidates = 0;  // a cut's gather buffer in block 0: 8-byte sort keys
  int smem_bytes = 0;
};

constexpr SampleTiling sample_tiling(int vocab) {
  SampleTiling t;
  t.blocks = 8;  // the portable cluster maximum
  t.threads = 512;
  t.warps = t.threads / 32;
  t.per_thread = ceil_div(vocab, t.blocks * t.threads) | 1;
  t.slice = t.threads * t.per_thread;
  t.candidates = 4096;
  t.smem_bytes = t.slice * 4 + t.candidates * 8;
  return t;
}

constexpr KernelTiles sample_tiles(int vocab, int b) {
  const SampleTiling t = sample_tiling(vocab);
  return KernelTiles{.grid = int64_t(b) * t.blocks, .threads = t.threads, .smem_bytes = t.smem_bytes}
      .with("cluster", t.blocks)
      .with("per_thread", t.per_thread);
}

}  // namespace rocket::tiling
