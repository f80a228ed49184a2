// Token embedding for the B rows of a decode bucket (or the tokens of a prefill chunk): row i of x
// is row ids[i] of the bf16 table, copied bit for bit. The activation stream x is bf16 on the H200
// (the plan's activation dtype), so the gather is a pure copy of 16-byte vectors.
//
// A prompt's image tokens take the vision tower's rows instead (docs/vision-tower.md, "In the H200
// engine"): the engine stages such a row's id as -1 - k, k its row in `image_rows`, so one gather
// serves both and a text step reads no more than before.
//
// A decode step's first kernel, it also lands the step's inputs: the ids and the rest of the step's
// per-row inputs are read from the host's pinned staging (mapped, over PCIe) rather than put on the
// device by a copy before the step, which would cost a copy-engine operation and its hand-off to the
// step's graph on every step.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"

namespace rocket::cuda {

struct EmbeddingParams {
  const __nv_bfloat16* table = nullptr;  // [vocab][kHidden]
  const int32_t* ids = nullptr;          // [rows], device or mapped pinned host memory; REQUIRES: id < vocab
  // [k][kHidden]: the merged image embeddings a row with id -1 - k takes. REQUIRES: set when an id is
  // negative, k below its rows.
  const __nv_bfloat16* image_rows = nullptr;
  __nv_bfloat16* x = nullptr;            // [rows][kHidden]
  // Copied by block 0 once the kernels before have completed (their reads of `inputs_to` are done):
  // input_vectors 16-byte vectors from inputs_from (mapped pinned host memory) to inputs_to (device).
  const uint4* inputs_from = nullptr;
  uint4* inputs_to = nullptr;
  int input_vectors = 0;
};

template <int kHidden>
struct EmbeddingTraits {
  static constexpr int kVectors = kHidden / 8;  // uint4 = 8 bf16
  static constexpr int kThreads = kVectors < 32 ? 32 : (kVectors > 256 ? 256 : kVectors);
  static_assert(kHidden % 8 == 0, "embedding rows are copied as 16-byte vectors");
};

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

template <int kHidden>
__global__ void __launch_bounds__(EmbeddingTraits<kHidden>::kThreads)
    embedding_kernel(const __grid_constant__ EmbeddingParams p) {
  release_then_wait();  // dependent_launch.cuh: nothing of the step is touched before this
  using T = EmbeddingTraits<kHidden>;
  const int row = blockIdx.x;
  if (row == 0)
    for (int v = threadIdx.x; v < p.input_vectors; v += T::kThreads) p.inputs_to[v] = p.inputs_from[v];
  // A plain load: ids may live in host memory the host rewrites between launches.
  const int32_t id = p.ids[row];
  const uint4* src = reinterpret_cast<const uint4*>(id >= 0 ? p.table + int64_t(id) * kHidden
                                                            : p.image_rows + (int64_t(-1) - id) * kHidden);
  uint4* dst = reinterpret_cast<uint4*>(p.x + int64_t(row) * kHidden);
  for (int v = threadIdx.x; v < T::kVectors; v += T::kThreads) dst[v] = __ldg(src + v);
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// `rows` is the bucket (decode) or the chunk's token count (prefill); ids were validated against the
// vocabulary on the host before they were staged.
template <int kHidden>
void embedding(const EmbeddingParams& p, int rows, cudaStream_t stream) {
  CHECK(rows > 0, "embedding of no rows");
  launch_dependent(embedding_kernel<kHidden>, rows, EmbeddingTraits<kHidden>::kThreads, 0, stream, p);
}

}  // namespace rocket::cuda
