// Gated full attention for one stream's prefill chunk of kT tokens at positions pos0 .. pos0+kT−1 on
// the H200: k_norm + RoPE and the append of the chunk's K and V into the stream's pages, then causal
// attention of each chunk token over the cached prefix and the chunk up to itself (q_norm + RoPE
// fused), gated by sigmoid(gate). Same params and workspace as decode (attention_decode.cuh).
//
// NOTE: the append is a kernel of its own because chunk token r reads the keys of tokens < r, which
// other blocks write; the launch boundary orders them. The attention then runs the decode split
// kernel with the chunk's tokens as its rows (each row's context ends at its own position, which is
// the causal mask), sharing one page table. It reads each KV tile once per chunk token (the rows hit
// L2 after the first); an mma kernel that shares a KV tile across the chunk's rows is the next step.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/dependent_launch.cuh"
#include "kernels/cuda/rope.cuh"

namespace rocket::cuda {

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

// Grid (kT, kv_heads), 2 warps: warp 0 normalises, rotates and stores token r's key for one KV head,
// warp 1 copies its value.
template <class S, int kT>
__global__ void __launch_bounds__(64) attention_append_kernel(const __grid_constant__ AttentionParams<S> p) {
  release_then_wait();  // dependent_launch.cuh: nothing of the step is touched before this
  const int r = blockIdx.x, kvh = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int pos = __ldg(p.pos) + r;
  const int64_t src = (int64_t(r) * S::kKvHeads + kvh) * S::kHeadDim;
  const int64_t dst = int64_t(__ldg(p.page_table + pos / S::kPageTokens)) * p.page_stride +
                      (int64_t(pos % S::kPageTokens) * S::kKvHeads + kvh) * S::kHeadDim;
  __shared__ float ks[S::kHeadDim];
  if (warp == 0) {
    norm_rope_head<S::kHeadDim, S::kRotaryDim>(load_head<S::kHeadDim>(p.k + src, p.k_norm), p.rope, p.rope_at[r], p.eps, 1.0f,
                                               ks);
    for (int d = lane; d < S::kHeadDim; d += 32) p.k_cache[dst + d] = __float2bfloat16_rn(ks[d]);
  } else {
    for (int d = lane; d < S::kHeadDim; d += 32) p.v_cache[dst + d] = p.v[src + d];
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

// Prefill chunk of kT tokens for one stream: p.pos[0] is the chunk's first position, p.page_table the
// stream's table (pages up to the chunk's last position mapped, the pages the chunk writes owned by
// this stream alone), rows of qg/k/v/out are the chunk's tokens. REQUIRES: as attention_decode, with
// partial holding AttentionTiles<S, kT>::kPartialFloats.
template <class S, int kT>
void attention_prefill(const AttentionParams<S>& p, cudaStream_t stream) {
  CHECK(p.qg && p.k && p.v && p.q_norm && p.k_norm && p.k_cache && p.v_cache && p.page_table && p.pos && p.rope_at && p.partial &&
            p.out,
        "attention_prefill: null pointer");
  CHECK(p.page_stride % 8 == 0 && p.table_width > 0, "attention_prefill: page stride must keep 16-byte alignment");
  launch_dependent(attention_append_kernel<S, kT>, dim3(kT, S::kKvHeads), 64, 0, stream, p);
  attention_paged<S, kT, true>(p, stream);
}

// The append alone for a piece of `rows` tokens of one stream (the token path runs its own attention
// over the piece afterwards). REQUIRES: as attention_prefill.
template <class S>
void attention_append(const AttentionParams<S>& p, int rows, cudaStream_t stream) {
  CHECK(rows >= 1 && p.k && p.v && p.k_norm && p.k_cache && p.v_cache && p.page_table && p.pos && p.rope_at,
        "attention_append: arguments");
  launch_dependent(attention_append_kernel<S, 1>, dim3(rows, S::kKvHeads), 64, 0, stream, p);
}

}  // namespace rocket::cuda
