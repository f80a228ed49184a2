// The vision tower on the H200: an image's patches to the merged embeddings the text model takes in
// place of its image tokens, the same function as the host reference (vision/tower.h, which
// docs/vision-tower.md derives from the HF reference), on the tensor cores.
//
//   patch embedding  cuBLAS GEMM (bf16 patches · bf16 weights, fp32), + bias + the learned positions
//                    (the host's taps: TowerLayout)                      embed_positions_kernel
//   blocks × depth   x += proj(attn(rot(qkv(LN1(x))))); x += fc2(act(fc1(LN2(x))))
//                    LN: bias_layer_norm_kernel (adds the previous GEMM's bias to x first, so each
//                    residual GEMM accumulates into x with beta = 1 and its bias joins one kernel later);
//                    qkv's bias and the 2-D rotary: qkv_rotary_kernel (q, k, v bf16 head-major, padded);
//                    attention: vision_attention_kernel (flash, bidirectional within each frame);
//                    fc1's bias and the activation: bias_gelu_kernel
//   merger           LN per patch (the last fc2's bias first), merge² consecutive patches as one row,
//                    fc1 + bias + exact GELU, fc2 + bias (bias_rows_kernel)
//
// Precision: the residual stream x and every GEMM's accumulation in fp32; GEMM inputs (patches, LN
// outputs, attention output, activations) rounded to bf16, as the HF model running in bf16 holds them;
// q and k rotated in fp32 and rounded once; the attention's P rounded to bf16 for P·V with the row sum
// taken over the rounded P (attention_flash.cuh's rule).
//
// Not graph-captured (the image count and sizes vary per request); deterministic for a given input
// (cuBLAS picks one algorithm per shape, no atomics). Every launch is checked.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/primitives/cp_async.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/fragments.cuh"
#include "kernels/cuda/primitives/gemm.cuh"
#include "kernels/cuda/primitives/smem_limit.cuh"
#include "kernels/cuda/primitives/weight_tile.cuh"
#include "kernels/tiling/vision.h"

namespace rocket::cuda {

// The tower's shapes (VisionTowerConfig's, as the kernels take them).
struct VisionTowerShape {
  int hidden = 0, heads = 0, head_dim = 0, intermediate = 0, depth = 0, patch_dim = 0, merge = 0, out_hidden = 0;
  bool tanh_gelu = true;  // the blocks' MLP activation: gelu_pytorch_tanh, else exact GELU
  int merged_dim() const { return hidden * merge * merge; }
};

// Device pointers to the tower's BF16 tensors (vision_tower_manifest's names).
struct VisionBlockWeights {
  const __nv_bfloat16 *norm1_w, *norm1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
  const __nv_bfloat16 *norm2_w, *norm2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
};
struct VisionTowerWeights {
  const __nv_bfloat16 *patch_w, *patch_b, *pos_table;
  std::vector<VisionBlockWeights> blocks;
  const __nv_bfloat16 *merger_norm_w, *merger_norm_b, *merger_fc1_w, *merger_fc1_b, *merger_fc2_w, *merger_fc2_b;
};

// The tower's weights by their names (vision_tower_manifest's `visual.*`): `at(name)` is the named
// tensor's device pointer (an engine's arena, a check's buffers).
template <class At>
VisionTowerWeights vision_tower_weights(int depth, At&& at) {
  VisionTowerWeights w{.patch_w = at("visual.patch_embed.proj.weight"),
                       .patch_b = at("visual.patch_embed.proj.bias"),
                       .pos_table = at("visual.pos_embed.weight")};
  for (int b = 0; b < depth; ++b) {
    const std::string p = "visual.blocks." + std::to_string(b) + ".";
    w.blocks.push_back({at(p + "norm1.weight"), at(p + "norm1.bias"), at(p + "attn.qkv.weight"), at(p + "attn.qkv.bias"),
                        at(p + "attn.proj.weight"), at(p + "attn.proj.bias"), at(p + "norm2.weight"), at(p + "norm2.bias"),
                        at(p + "mlp.linear_fc1.weight"), at(p + "mlp.linear_fc1.bias"), at(p + "mlp.linear_fc2.weight"),
                        at(p + "mlp.linear_fc2.bias")});
  }
  w.merger_norm_w = at("visual.merger.norm.weight");
  w.merger_norm_b = at("visual.merger.norm.bias");
  w.merger_fc1_w = at("visual.merger.linear_fc1.weight");
  w.merger_fc1_b = at("visual.merger.linear_fc1.bias");
  w.merger_fc2_w = at("visual.merger.linear_fc2.weight");
  w.merger_fc2_b = at("visual.merger.linear_fc2.bias");
  return w;
}

// One forward's inputs in device memory: the processor's patches and the host's TowerLayout.
struct VisionTowerInputs {
  int patches = 0;
  const float* pixels = nullptr;         // [patches][patch_dim]
  const int4* tap_rows = nullptr;        // [patches]: PositionTaps::row
  const float4* tap_weights = nullptr;   // [patches]: PositionTaps::weight
  const float* cos = nullptr;            // [patches][head_dim / 2]
  const float* sin = nullptr;
  const int4* tiles = nullptr;           // attention query tiles (vision_attention_tiles)
  int tile_count = 0;
};

// Scratch for `patches` patches (vision_tower_scratch_bytes), and the outputs.
struct VisionTowerBuffers {
  __nv_bfloat16* act = nullptr;  // [patches][max(patch_dim, intermediate, hidden)] a GEMM's bf16 input
  __nv_bfloat16* normed = nullptr;  // [patches][hidden] an LN's output
  float* wide = nullptr;         // [patches][max(3 hidden, intermediate)] a GEMM's fp32 output
  __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr;  // [heads][patches][padded head_dim]
  __nv_bfloat16* attn = nullptr;  // [patches][hidden]
  float* hidden = nullptr;       // out [patches][hidden]: the residual stream, then the last block's output
  float* merged = nullptr;       // out [patches / merge²][out_hidden]
};

__host__ __device__ constexpr int vision_padded_head_dim(int head_dim) { return (head_dim + 15) / 16 * 16; }
constexpr int kVisionAttentionWarps = 8;                     // 16 query rows each
constexpr int kVisionQueryTile = 16 * kVisionAttentionWarps;  // query rows of one attention block
static_assert(kVisionQueryTile == tiling::kVisionQueryRows, "the plan bounds the attention's tiles with tiling's query rows");

// The attention's query tiles for the frames of a TowerLayout (segment boundaries): (first patch of the
// segment, its length, first query row in it, 0), `rows` rows each.
inline std::vector<int4> vision_attention_tiles(const std::vector<int64_t>& frames, int rows = kVisionQueryTile) {
  std::vector<int4> tiles;
  for (size_t s = 0; s + 1 < frames.size(); ++s) {
    const int len = int(frames[s + 1] - frames[s]);
    for (int q0 = 0; q0 < len; q0 += rows) tiles.push_back(make_int4(int(frames[s]), len, q0, 0));
  }
  return tiles;
}

namespace vision_kernels {

__global__ void to_bf16_kernel(const float* in, __nv_bfloat16* out, int64_t count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = __float2bfloat16_rn(in[i]);
}

// x [n][h] holds W·patch: x = (x + b) + Σ_j weight_j · table[row_j] (the host's order).
__global__ void embed_positions_kernel(float* x, const __nv_bfloat16* bias, const __nv_bfloat16* table, const int4* rows,
                                       const float4* weights, int h) {
  const int t = blockIdx.x;
  const int4 r = rows[t];
  const float4 w = weights[t];
  for (int d = threadIdx.x; d < h; d += blockDim.x) {
    const float pos = w.x * __bfloat162float(table[int64_t(r.x) * h + d]) + w.y * __bfloat162float(table[int64_t(r.y) * h + d]) +
                      w.z * __bfloat162float(table[int64_t(r.z) * h + d]) + w.w * __bfloat162float(table[int64_t(r.w) * h + d]);
    float* o = x + int64_t(t) * h + d;
    *o = (*o + __bfloat162float(bias[d])) + pos;
  }
}

// One warp per row: x += bias (when given, written back), then y = bf16(LN(x) · w + b), two passes.
__global__ void bias_layer_norm_kernel(float* x, const __nv_bfloat16* bias, const __nv_bfloat16* w, const __nv_bfloat16* b,
                                       __nv_bfloat16* y, int rows, int h, float eps) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  float* xr = x + int64_t(row) * h;
  float sum = 0;
  for (int d = lane; d < h; d += 32) {
    float v = xr[d];
    if (bias) xr[d] = v = v + __bfloat162float(bias[d]);
    sum += v;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float mean = sum / float(h);
  float sq = 0;
  for (int d = lane; d < h; d += 32) {
    const float c = xr[d] - mean;
    sq += c * c;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
  const float inv = rsqrtf(sq / float(h) + eps);
  for (int d = lane; d < h; d += 32)
    y[int64_t(row) * h + d] = __float2bfloat16_rn((xr[d] - mean) * inv * __bfloat162float(w[d]) + __bfloat162float(b[d]));
}

// One block per patch: qkv [n][3h] (+ bias) split into q, k, v [heads][n][hdp] bf16, q and k rotated
// (dims i < hd/2 with i + hd/2 by the patch's angle i), the padding dims zero.
__global__ void qkv_rotary_kernel(const float* qkv, const __nv_bfloat16* bias, const float* cos_t, const float* sin_t,
                                  __nv_bfloat16* q, __nv_bfloat16* k, __nv_bfloat16* v, int n, int heads, int hd, int hdp) {
  const int t = blockIdx.x, h = heads * hd, half = hd / 2;
  const float* row = qkv + int64_t(t) * 3 * h;
  const float* c = cos_t + int64_t(t) * half;
  const float* s = sin_t + int64_t(t) * half;
  for (int j = threadIdx.x; j < 3 * heads * hdp; j += blockDim.x) {
    const int which = j / (heads * hdp), head = j / hdp % heads, i = j % hdp;
    __nv_bfloat16* dst = (which == 0 ? q : which == 1 ? k : v) + (int64_t(head) * n + t) * hdp + i;
    if (i >= hd) {
      *dst = __float2bfloat16_rn(0.0f);
      continue;
    }
    const int at = which * h + head * hd;
    const float a = row[at + i] + __bfloat162float(bias[at + i]);
    float out = a;
    if (which < 2) {
      const int pair = i < half ? i + half : i - half;
      const float p = row[at + pair] + __bfloat162float(bias[at + pair]);
      out = i < half ? a * c[i] - p * s[i] : a * c[i - half] + p * s[i - half];
    }
    *dst = __float2bfloat16_rn(out);
  }
}

// out [rows][cols] bf16 = act(in + bias): the tanh GELU or the exact one.
__global__ void bias_gelu_kernel(const float* in, const __nv_bfloat16* bias, __nv_bfloat16* out, int64_t rows, int cols,
                                 bool tanh_gelu) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const float v = in[i] + __bfloat162float(bias[i % cols]);
  float g;
  if (tanh_gelu) {
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    g = 0.5f * v * (1.0f + tanhf(u));
  } else {
    g = 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
  }
  out[i] = __float2bfloat16_rn(g);
}

__global__ void bias_rows_kernel(float* y, const __nv_bfloat16* bias, int64_t rows, int cols) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) y[i] += __bfloat162float(bias[i % cols]);
}

// Flash attention of one head over one query tile of one frame (bidirectional: every key of the frame).
// kWarps warps × 16 query rows; key tiles of 64, double-buffered (tile j + 1's keys and values load
// while tile j is computed). S = Q Kᵀ by mma.m16n8k16 (bf16, fp32 accumulators), online softmax in log2
// units, O += P V with V through ldmatrix.trans. Keys and queries past the frame are zero-filled; keys
// past it are masked (-inf), queries past it never stored. Rows of padded width hdp + 8 bf16: the 8 rows
// of a fragment load or an ldmatrix fall in distinct banks. Dynamic shared memory:
// VisionAttention<HD, kWarps>::kSmemBytes.
template <int HD, int kWarps>
struct VisionAttention {
  static constexpr int kHdp = vision_padded_head_dim(HD), kPitch = kHdp + 8, kRows = 16 * kWarps, kKeys = 64;
  static constexpr int kTileElems = kKeys * kPitch;
  static constexpr int kSmemBytes = (kRows * kPitch + 4 * kTileElems) * 2;  // Q, then two K and two V tiles
};

template <int HD, int kWarps>
__global__ void __launch_bounds__(32 * kWarps) vision_attention_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                                       const __nv_bfloat16* v, const int4* tiles, int n,
                                                                       int heads, float scale_log2, __nv_bfloat16* out) {
  using A = VisionAttention<HD, kWarps>;
  constexpr int kHdp = A::kHdp, kPitch = A::kPitch, kChunks = kHdp / 8, kKc = kHdp / 16, kDt = HD / 8;
  constexpr int kRows = A::kRows, kKeys = A::kKeys, kThreads = 32 * kWarps;
  static_assert(HD % 8 == 0, "vision attention: head_dim a multiple of 8");
  extern __shared__ __align__(16) __nv_bfloat16 smem[];
  __nv_bfloat16* qs = smem;
  __nv_bfloat16* kv = smem + kRows * kPitch;  // buffer b: K at kv + 2b·tile, V after it
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, c = lane % 4;
  const int4 tile = tiles[blockIdx.x];
  const int s0 = tile.x, len = tile.y, q0 = tile.z, head = blockIdx.y;
  const __nv_bfloat16* qh = q + (int64_t(head) * n + s0) * kHdp;
  const __nv_bfloat16* kh = k + (int64_t(head) * n + s0) * kHdp;
  const __nv_bfloat16* vh = v + (int64_t(head) * n + s0) * kHdp;
  const auto load_kv = [&](int buf, int j0) {
    __nv_bfloat16* ks = kv + 2 * buf * A::kTileElems;
    __nv_bfloat16* vs = ks + A::kTileElems;
    for (int i = tid; i < kKeys * kChunks; i += kThreads) {
      const int r = i / kChunks, ch = i % kChunks;
      const bool ok = j0 + r < len;
      const int64_t at = int64_t(ok ? j0 + r : 0) * kHdp + ch * 8;
      cp_async16(ks + r * kPitch + ch * 8, kh + at, ok);
      cp_async16(vs + r * kPitch + ch * 8, vh + at, ok);
    }
  };

  for (int i = tid; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, ch = i % kChunks;
    const bool ok = q0 + r < len;
    cp_async16(qs + r * kPitch + ch * 8, qh + int64_t(ok ? q0 + r : 0) * kHdp + ch * 8, ok);
  }
  load_kv(0, 0);
  cp_async_commit();  // Q and the first tile: one group

  uint32_t qf[kKc][4];
  const int r0 = 16 * warp;
  float o[kDt][4];
#pragma unroll
  for (int d = 0; d < kDt; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8; l: this lane's part

  const int key_tiles = (len + kKeys - 1) / kKeys;
  for (int j = 0; j < key_tiles; ++j) {
    const int j0 = j * kKeys;
    if (j + 1 < key_tiles) load_kv((j + 1) % 2, j0 + kKeys);
    cp_async_commit();
    cp_async_wait<1>();  // tile j (and Q) landed for this thread
    __syncthreads();     // ... and for every thread
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < kKc; ++kk) {
        const __nv_bfloat16* lo = qs + (r0 + g) * kPitch + kk * 16 + 2 * c;
        const __nv_bfloat16* hi = lo + 8 * kPitch;
        qf[kk][0] = *reinterpret_cast<const uint32_t*>(lo);
        qf[kk][1] = *reinterpret_cast<const uint32_t*>(hi);
        qf[kk][2] = *reinterpret_cast<const uint32_t*>(lo + 8);
        qf[kk][3] = *reinterpret_cast<const uint32_t*>(hi + 8);
      }
    }
    const __nv_bfloat16* ks = kv + 2 * (j % 2) * A::kTileElems;
    const __nv_bfloat16* vs = ks + A::kTileElems;

    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kKc; ++kk) {
        const __nv_bfloat16* kr = ks + (nt * 8 + g) * kPitch + kk * 16 + 2 * c;
        mma_bf16_16816(s[nt], qf[kk], *reinterpret_cast<const uint32_t*>(kr), *reinterpret_cast<const uint32_t*>(kr + 8));
      }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = j0 + nt * 8 + 2 * c + (e & 1);
        s[nt][e] = key < len ? s[nt][e] * scale_log2 : -INFINITY;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[nt][e]);
      }
    float corr[2];
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) {
      tile_max[h2] = fmaxf(tile_max[h2], __shfl_xor_sync(0xffffffffu, tile_max[h2], 1));
      tile_max[h2] = fmaxf(tile_max[h2], __shfl_xor_sync(0xffffffffu, tile_max[h2], 2));
      const float m_new = fmaxf(m[h2], tile_max[h2]);
      corr[h2] = exp2f(m[h2] - m_new);  // 0 on the first tile (m = -inf)
      m[h2] = m_new;
      l[h2] *= corr[h2];
    }
#pragma unroll
    for (int d = 0; d < kDt; ++d) {
      o[d][0] *= corr[0], o[d][1] *= corr[0];
      o[d][2] *= corr[1], o[d][3] *= corr[1];
    }
    // P in bf16 as the A operand, 16 keys (two score tiles) per k step.
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      uint32_t a[4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float* sv = s[2 * kc + half];
        const __nv_bfloat162 top = __floats2bfloat162_rn(exp2f(sv[0] - m[0]), exp2f(sv[1] - m[0]));
        const __nv_bfloat162 bot = __floats2bfloat162_rn(exp2f(sv[2] - m[1]), exp2f(sv[3] - m[1]));
        l[0] += __low2float(top) + __high2float(top);
        l[1] += __low2float(bot) + __high2float(bot);
        a[2 * half] = *reinterpret_cast<const uint32_t*>(&top);
        a[2 * half + 1] = *reinterpret_cast<const uint32_t*>(&bot);
      }
      // lanes 0-7 address keys kc·16 + 0..7, lanes 8-15 keys + 8..15 (lanes 16-31 repeat them).
      const __nv_bfloat16* vrow = vs + (kc * 16 + (lane % 16)) * kPitch;
#pragma unroll
      for (int d = 0; d < kDt; ++d) {
        uint32_t b0, b1;
        ldmatrix_x2_trans(b0, b1, shared_address(vrow + d * 8));
        mma_bf16_16816(o[d], a, b0, b1);
      }
    }
    __syncthreads();  // every warp is done with buffer j % 2 before tile j + 2 loads into it
  }
#pragma unroll
  for (int h2 = 0; h2 < 2; ++h2) {
    l[h2] += __shfl_xor_sync(0xffffffffu, l[h2], 1);
    l[h2] += __shfl_xor_sync(0xffffffffu, l[h2], 2);
  }
  const int h = heads * HD;
#pragma unroll
  for (int h2 = 0; h2 < 2; ++h2) {
    const int row = q0 + r0 + g + 8 * h2;
    if (row >= len) continue;
    const float inv = 1.0f / l[h2];
    __nv_bfloat16* dst = out + int64_t(s0 + row) * h + head * HD + 2 * c;
#pragma unroll
    for (int d = 0; d < kDt; ++d)
      *reinterpret_cast<uint32_t*>(dst + d * 8) = pack_bf16(o[d][2 * h2] * inv, o[d][2 * h2 + 1] * inv);
  }
}

inline unsigned blocks_for(int64_t count, int threads) { return unsigned((count + threads - 1) / threads); }

}  // namespace vision_kernels

// Device bytes of VisionTowerBuffers for `patches` patches, each buffer 256-byte aligned, in the order
// vision_tower_buffers carves them.
inline size_t vision_tower_scratch_bytes(const VisionTowerShape& s, int64_t patches) {
  return tiling::vision_scratch_layout({s.hidden, s.heads, s.head_dim, s.intermediate, s.patch_dim, s.merge, s.out_hidden},
                                       patches).bytes;
}

inline VisionTowerBuffers vision_tower_buffers(const VisionTowerShape& s, int64_t patches, void* base) {
  const auto a = [](size_t b) { return (b + 255) / 256 * 256; };
  auto* at = static_cast<uint8_t*>(base);
  const auto take = [&](size_t bytes) {
    uint8_t* p = at;
    at += a(bytes);
    return p;
  };
  const int64_t hdp = vision_padded_head_dim(s.head_dim);
  const int64_t act = std::max<int64_t>({s.patch_dim, s.intermediate, s.hidden});
  const int64_t wide = std::max<int64_t>(3 * int64_t(s.hidden), s.intermediate);
  VisionTowerBuffers b;
  b.act = reinterpret_cast<__nv_bfloat16*>(take(patches * act * 2));
  b.normed = reinterpret_cast<__nv_bfloat16*>(take(patches * s.hidden * 2));
  b.wide = reinterpret_cast<float*>(take(patches * wide * 4));
  b.q = reinterpret_cast<__nv_bfloat16*>(take(s.heads * patches * hdp * 2));
  b.k = reinterpret_cast<__nv_bfloat16*>(take(s.heads * patches * hdp * 2));
  b.v = reinterpret_cast<__nv_bfloat16*>(take(s.heads * patches * hdp * 2));
  b.attn = reinterpret_cast<__nv_bfloat16*>(take(patches * s.hidden * 2));
  b.hidden = reinterpret_cast<float*>(take(patches * s.hidden * 4));
  b.merged = reinterpret_cast<float*>(take(patches / (s.merge * s.merge) * s.out_hidden * 4));
  return b;
}

// One block's attention over every query tile (vision_attention_tiles with 16·kWarps rows) and head.
template <int HD, int kWarps>
void vision_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const int4* tiles, int tile_count,
                      int n, int heads, __nv_bfloat16* out, cudaStream_t stream) {
  using A = vision_kernels::VisionAttention<HD, kWarps>;
  raise_smem_limit_once<vision_kernels::vision_attention_kernel<HD, kWarps>>(A::kSmemBytes);
  const float scale_log2 = float(std::pow(double(HD), -0.5)) * 1.4426950408889634f;
  vision_kernels::vision_attention_kernel<HD, kWarps>
      <<<dim3(unsigned(tile_count), unsigned(heads)), 32 * kWarps, A::kSmemBytes, stream>>>(q, k, v, tiles, n, heads, scale_log2, out);
  CUDA_CHECK_LAUNCH();
}

// The tower over one forward's images: b.hidden and b.merged. REQUIRES: a head_dim the attention is
// instantiated for (16: the tiny fuel's, 72: the releases'), patches a multiple of merge², the cuBLAS
// handle on `stream`.
inline void vision_tower_forward(const VisionTowerShape& s, const VisionTowerWeights& w, const VisionTowerInputs& in,
                                 const VisionTowerBuffers& b, cublasHandle_t cublas, cudaStream_t stream, float eps = 1e-6f) {
  using namespace vision_kernels;
  CHECK(s.head_dim == 16 || s.head_dim == 72, "vision tower: a head_dim with an attention kernel (16 or 72)");
  CHECK(in.patches % (s.merge * s.merge) == 0, "vision tower: patches in whole merge windows");
  CHECK(int(w.blocks.size()) == s.depth, "vision tower: one weight set per block");
  const int n = in.patches, h = s.hidden, hdp = vision_padded_head_dim(s.head_dim);
  const int ln_rows_per_block = 8;
  const unsigned ln_blocks = blocks_for(n, ln_rows_per_block);

  to_bf16_kernel<<<blocks_for(int64_t(n) * s.patch_dim, 256), 256, 0, stream>>>(in.pixels, b.act, int64_t(n) * s.patch_dim);
  CUDA_CHECK_LAUNCH();
  gemm_rows(cublas, w.patch_w, h, s.patch_dim, b.act, s.patch_dim, n, b.hidden, h);
  embed_positions_kernel<<<n, 128, 0, stream>>>(b.hidden, w.patch_b, w.pos_table, in.tap_rows, in.tap_weights, h);
  CUDA_CHECK_LAUNCH();
  const __nv_bfloat16* pending_bias = nullptr;  // the last residual GEMM's bias, added by the next LN
  for (const VisionBlockWeights& blk : w.blocks) {
    bias_layer_norm_kernel<<<ln_blocks, 32 * ln_rows_per_block, 0, stream>>>(b.hidden, pending_bias, blk.norm1_w, blk.norm1_b,
                                                                            b.normed, n, h, eps);
    CUDA_CHECK_LAUNCH();
    gemm_rows(cublas, blk.qkv_w, 3 * h, h, b.normed, h, n, b.wide, 3 * h);
    qkv_rotary_kernel<<<n, 256, 0, stream>>>(b.wide, blk.qkv_b, in.cos, in.sin, b.q, b.k, b.v, n, s.heads, s.head_dim, hdp);
    CUDA_CHECK_LAUNCH();
    if (s.head_dim == 16)
      vision_attention<16, kVisionAttentionWarps>(b.q, b.k, b.v, in.tiles, in.tile_count, n, s.heads, b.attn, stream);
    else
      vision_attention<72, kVisionAttentionWarps>(b.q, b.k, b.v, in.tiles, in.tile_count, n, s.heads, b.attn, stream);
    gemm_rows(cublas, blk.proj_w, h, h, b.attn, h, n, b.hidden, h, 1.0f, 1.0f);
    bias_layer_norm_kernel<<<ln_blocks, 32 * ln_rows_per_block, 0, stream>>>(b.hidden, blk.proj_b, blk.norm2_w, blk.norm2_b,
                                                                            b.normed, n, h, eps);
    CUDA_CHECK_LAUNCH();
    gemm_rows(cublas, blk.fc1_w, s.intermediate, h, b.normed, h, n, b.wide, s.intermediate);
    bias_gelu_kernel<<<blocks_for(int64_t(n) * s.intermediate, 256), 256, 0, stream>>>(b.wide, blk.fc1_b, b.act, n, s.intermediate,
                                                                                       s.tanh_gelu);
    CUDA_CHECK_LAUNCH();
    gemm_rows(cublas, blk.fc2_w, h, s.intermediate, b.act, s.intermediate, n, b.hidden, h, 1.0f, 1.0f);
    pending_bias = blk.fc2_b;
  }
  // The merger: LN per patch (after the last block's fc2 bias, which makes b.hidden the last block's
  // output), then merge² consecutive patches are one row of merged_dim.
  bias_layer_norm_kernel<<<ln_blocks, 32 * ln_rows_per_block, 0, stream>>>(b.hidden, pending_bias, w.merger_norm_w,
                                                                          w.merger_norm_b, b.normed, n, h, eps);
  CUDA_CHECK_LAUNCH();
  const int tokens = n / (s.merge * s.merge), wide = s.merged_dim();
  gemm_rows(cublas, w.merger_fc1_w, wide, wide, b.normed, wide, tokens, b.wide, wide);
  bias_gelu_kernel<<<blocks_for(int64_t(tokens) * wide, 256), 256, 0, stream>>>(b.wide, w.merger_fc1_b, b.act, tokens, wide,
                                                                                false);
  CUDA_CHECK_LAUNCH();
  gemm_rows(cublas, w.merger_fc2_w, s.out_hidden, wide, b.act, wide, tokens, b.merged, s.out_hidden);
  bias_rows_kernel<<<blocks_for(int64_t(tokens) * s.out_hidden, 256), 256, 0, stream>>>(b.merged, w.merger_fc2_b, tokens,
                                                                                        s.out_hidden);
  CUDA_CHECK_LAUNCH();
}

}  // namespace rocket::cuda
