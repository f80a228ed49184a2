// The MoE block of a prefill piece on the H200: n tokens (up to the plan's max_tokens) through the
// router, the routed SwiGLU experts and the shared expert on the tensor cores, with each expert's
// weights streamed once per piece instead of once per 32 decode rows (moe_dispatch.cuh and
// moe_experts.cuh do the same math for a decode bucket; this is their token-shaped counterpart and
// computes the same function, up to fp32 summation order). Five kernels, in stream order:
//
//   route    one warp per token: router_row (router.cuh) writes the top-k choices and weights; each
//            choice sets the token's bit in its expert's bitmap and counts it; the warp also computes
//            the shared expert's gate sigmoid(shared_expert_gate . x).
//   group    the counting sort of the n * top_k (token, choice) pairs by expert, ascending token within
//            an expert (a pure function of the choices: counts and bitmaps are order-free, and slots
//            are ranks in the bitmaps): every block scans all experts' counts, then one warp per
//            expert writes its slots (slot -> token, (token, choice) -> slot) and its items, the
//            M-tiles of kTokens rows the GEMMs walk.
//   gate_up  one block per (item, N-tile): the item's token rows of x gathered, the expert's gate and
//            up rows of its N-tile, K = hidden; writes silu(gate) * up in bf16 by slot. The shared
//            expert is one more group of items over all n tokens (bf16 weights).
//   down     the same for the down projection (K = inter), fp32 by slot; the shared expert's by token.
//   combine  out = bf16(shared_scale * shared + sum over choices in choice order of weight * down),
//            rounded once, as moe_down does.
//
// The GEMMs (piece_gemm below): a block stages, per K step, 2 x kRows weight rows (gate and up rows of
// its N-tile, or two halves of its output columns) and 64 gathered activation rows in shared memory
// with cp.async, kStages steps in flight. Warp w owns weight rows 16w.. of each half and all 64 tokens:
// 2 x 8 mma.m16n8k16 tiles (weights as the A operand, tokens as B), so every weight is decoded once
// per block, in registers, with the decode kernels' code (nvfp4_code::images, nvfp4_scaled; block FP8:
// fp8_scaled_quad with the step's block scale, read from global memory: bit-exact the same bf16
// products). The routed experts and the shared expert each have their precision. Lane (g, c) holds kO consecutive octets (8 columns) of its rows per step,
// and reads the activations of exactly those columns (the k order inside an mma is free as long as A
// and B agree), as weight_tile.cuh does in registers.
// NOTE: measured (h200-prefill.md, 2026-12-05, H100): the SASS of the first version spent most of its
// instructions outside the mma: each stage's copies were generic strided loops (loop control and
// remainder branches around every cp.async), and each 8-token group recomputed its swizzled address
// and ran its four mma back to back on two accumulators behind its own branch. Copies at compile-time
// counts and token groups in pairs (one address per octet, four independent accumulators between an
// accumulator's two mma) took gate_up from 505 to 385 us and down from 259 to 197 us at 2048 tokens,
// with bit-identical outputs.
// NOTE: measured (h200-prefill.md, 2026-12-05T19:09Z-19:29Z): at small pieces (64-256 tokens, the mixed
// steps' sizes) the weights stream at ~1.4 TB/s, and neither 128-column stages (64 contiguous code bytes
// a row instead of 32) nor 16-token items at three blocks an SM made it faster: each warp's per-step chain
// (decode, shared-memory loads, copies, barrier) is latency-bound at any occupancy. Fewer instructions
// per weight would pay (weights straight to registers as the decode kernels read them, or wgmma).
//
// Graph-capturable, no host synchronisation: grids depend on n only (sized for the most items n tokens
// can make); blocks past the piece's item count exit at once. Deterministic: no float atomics, fixed
// summation orders. Workspace: tiling::moe_piece_workspace (one allocation, its first zeroed_bytes()
// cleared by moe_piece itself).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "fuel/chemistry.h"
#include "kernels/cuda/booster.cuh"
#include "kernels/cuda/moe_dispatch.cuh"
#include "kernels/cuda/moe_shared_gate.cuh"
#include "kernels/cuda/primitives/cp_async.cuh"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/nvfp4.cuh"
#include "kernels/cuda/primitives/reduce.cuh"
#include "kernels/cuda/primitives/smem_limit.cuh"
#include "kernels/cuda/primitives/weight_tile.cuh"
#include "kernels/cuda/router.cuh"
#include "kernels/tiling/moe.h"
#include "plan/layout.h"

namespace rocket::cuda {

struct MoePieceParams {
  const __nv_bfloat16* x = nullptr;  // [n][hidden] normalised hidden states
  const float* logits = nullptr;     // [n][experts] router logits
  const uint8_t* experts = nullptr;  // this layer's expert units: unit e at experts + e * expert_stride
  uint64_t expert_stride = 0;
  ExpertAt expert;                                    // gate / up / down offsets inside a unit
  const void* shared_gate = nullptr;                  // [shared_inter][hidden] in the shared expert's precision
  const void* shared_up = nullptr;                    // [shared_inter][hidden]
  const void* shared_down = nullptr;                  // [hidden][shared_inter]
  const __nv_bfloat16* shared_expert_gate = nullptr;  // [hidden]
  int32_t* route_idx = nullptr;                       // [n][top_k] out: choices, descending probability
  float* route_w = nullptr;                           // [n][top_k] out: renormalised router weights
  void* workspace = nullptr;  // tiling::moe_piece_workspace(dims, max_tokens).bytes, 256-byte aligned
  int max_tokens = 0;         // what the workspace was sized for
  __nv_bfloat16* out = nullptr;  // [n][hidden] MoE block output
  const float* shared_gate_block_scale = nullptr;  // FP8 shared expert: its block scales
  const float* shared_up_block_scale = nullptr;
  const float* shared_down_block_scale = nullptr;
};

// The workspace's buffers, typed (moe_piece_work resolves them from MoePieceParams).
struct MoePieceWork {
  int* counts;
  uint32_t* bits;
  int bit_words;
  int* expert_start;
  int* item_count;
  int4* items;  // expert, first slot, rows, 0
  int* slot_token;
  int* slot_of;
  float* shared_scale;
  __nv_bfloat16* act;
  __nv_bfloat16* shared_act;
  float* y;
  float* shared_y;
};

// One grouped GEMM's shapes: 2 x kRows weight rows of K columns (precision Q) against kTokens
// activation rows, kWarps warps.
template <Precision Q, int K, int kWarps_>
struct PieceGemmTraits {
  static constexpr bool kNvfp4 = Q == Precision::kNVFP4;
  static constexpr bool kFp8 = Q == Precision::kFP8Block;
  static constexpr int kWarps = kWarps_, kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;  // weight rows per half
  static constexpr int kTokens = 64;
  static constexpr int kBK = tiling::moe_piece_bk(Q, K);
  static constexpr int kSteps = K / kBK;
  static constexpr int kStages = tiling::moe_piece_stages(Q);
  static constexpr int kQ = kBK / 8;  // 16-byte chunks of a staged activation row (bf16 weight rows too)
  static constexpr int kO = kQ / 4;   // octets per lane per step
  static constexpr int kWRowBytes = kNvfp4 ? kBK / 2 : kFp8 ? kBK : 2 * kBK;
  static constexpr int kSRowBytes = kNvfp4 ? kBK / 16 : 0;
  static constexpr int kXRowBytes = 2 * kBK;
  static constexpr int kWBytes = 2 * kRows * kWRowBytes, kSBytes = 2 * kRows * kSRowBytes, kXBytes = kTokens * kXRowBytes;
  static constexpr int kStageBytes = kWBytes + kSBytes + kXBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes;
  static constexpr int kGlobalRowBytes = tiling::row_bytes(Q, K);
  static_assert(!kFp8 || (kO == 2 && tiling::kFp8Block % kBK == 0), "piece gemm: FP8 steps of 64 columns (one 16-byte load a lane)");
  static_assert(kBK >= 32 && K % kBK == 0, "piece gemm: K must be a multiple of 32");
  static_assert(kQ == 4 || kQ == 8 || kQ == 16, "piece gemm: 4, 8 or 16 chunks per staged row");
  static_assert(kStageBytes % 128 == 0, "piece gemm: stages stay 128-byte aligned");
};

template <class D, Precision P, Precision PS = Precision::kBF16>
struct MoePieceTraits {
  static constexpr tiling::MoePieceTiling kTiling = tiling::moe_piece_tiling(D::kDims);
  static constexpr int kTokens = kTiling.tokens;
  using GateUp = PieceGemmTraits<P, D::kHidden, kTiling.gate_up_warps>;
  using SharedGateUp = PieceGemmTraits<PS, D::kHidden, kTiling.gate_up_warps>;
  using Down = PieceGemmTraits<P, D::kInter, kTiling.down_warps>;
  using SharedDown = PieceGemmTraits<PS, D::kSharedInter, kTiling.down_warps>;
  static constexpr int kGateUpThreads = GateUp::kThreads, kDownThreads = Down::kThreads;
  // gate_up stages its act tile (bf16 [kTokens][kRows], padded) and down its y tile (fp32 [kTokens][2 kRows])
  // in the pipeline's shared memory once the K loop is done.
  static constexpr int kActPitch = 2 * GateUp::kRows + 16;  // bytes: 8 lanes' stores of a token hit 8 banks
  static constexpr int kYPitch = 4 * 2 * Down::kRows + 16;
  static constexpr int kGateUpSmem = tiling::max(tiling::max(GateUp::kSmemBytes, SharedGateUp::kSmemBytes), kTokens * kActPitch);
  static constexpr int kDownSmem = tiling::max(tiling::max(Down::kSmemBytes, SharedDown::kSmemBytes), kTokens * kYPitch);
  static constexpr int kGroupThreads = kTiling.group_threads;
  static constexpr int kGroupExpertsPerBlock = kGroupThreads / 32;
  static constexpr int kRouteWarps = 8;
  static constexpr int kCombineThreads = 256;
  static_assert(kTokens == GateUp::kTokens, "moe piece: items are the GEMMs' M-tiles");
  static_assert(D::kExperts <= kGroupThreads, "moe piece: the grouping scans one count per thread");
  static_assert(D::kTopK <= 32, "moe piece: one lane per choice");
  static_assert(D::kHidden % 8 == 0, "moe piece: 16-byte rows");
  static_assert(kGateUpSmem <= kBooster.smem_per_block && kDownSmem <= kBooster.smem_per_block,
                "moe piece: shared memory exceeds the booster's per-block limit");
};

// ---------------------------------------------------------------------------------------------------
// Device helpers

namespace piece {

__device__ __forceinline__ uint4 lds128(const void* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(shared_address(p)));
  return v;
}

// Where chunk q (16 bytes) of staged row `row` sits. A lane (g, c) reads chunk c * kO + o of rows g and
// g + 8 (and of token rows 8j + g); the eight lanes of a shared-memory phase are g in {0, 1}, c in 0..3,
// so their eight chunks must fall in eight distinct 4-bank groups (chunk mod 8): with 16 chunks a row
// (lanes 64 bytes apart) the swizzle spreads c's high bit and g's parity over the low two bits, with 8
// (32 bytes apart) g's parity over bit 0; with 4 (rows of 64 bytes) rows g and g + 1 already differ.
template <int kQ>
__device__ __forceinline__ int chunk_at(int row, int q) {
  if constexpr (kQ == 16) return q ^ ((q >> 3 & 1) << 1 | (row & 1));
  else if constexpr (kQ == 8) return q ^ (row & 1);
  else return q;
}

// One piece GEMM of a block: acc[m][j] (m: weight half, j: token group of 8) = rows 16w.. of half m
// (w0 / w1: global row 0 of each half; NVFP4 block scales of that row, or FP8 ones of its 128-row
// block, at s0 / s1: WeightTileTraits::scale_at; a half's rows share one FP8 block) times the kTokens activation rows
// rows_s[] of x (pitch K; -1: a row past the item, read as zeros and never stored), over all of K.
// jmax: token groups holding real rows (the mma of the pairs past them are skipped). piece_smem:
// G::kSmemBytes.
template <class G>
__device__ __forceinline__ void piece_gemm(const uint8_t* w0, const uint8_t* w1, const uint8_t* s0, const uint8_t* s1,
                                           const __nv_bfloat16* x, const int* rows_s, int jmax, uint8_t* piece_smem,
                                           float (&acc)[2][8][4]) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[m][j][q] = 0.0f;

  // Each thread's copies of a stage are fixed for the whole K loop (compile-time counts, no loop
  // control): a weight chunk q of rows r0 + i * kWStep (the first kWChunks / 2 in the first half), one
  // scale row, activation chunk q of token rows r0 + i * kXStep. Steps are even, so a row's swizzle
  // parity is its first row's.
  constexpr int kWChunks = G::kWRowBytes / 16, kWStep = G::kThreads / kWChunks, kWCopies = 2 * G::kRows / kWStep;
  constexpr int kXStep = G::kThreads / G::kQ, kXCopies = G::kTokens / kXStep;
  static_assert(G::kThreads % kWChunks == 0 && G::kRows % kWStep == 0 && kWStep % 2 == 0, "piece gemm: weight copies tile the stage");
  static_assert(G::kThreads % G::kQ == 0 && G::kTokens % kXStep == 0 && kXStep % 2 == 0, "piece gemm: activation copies tile the stage");
  static_assert(!G::kNvfp4 || 2 * G::kRows == G::kThreads, "piece gemm: one scale row per thread");
  const int wq = tid % kWChunks, wr = tid / kWChunks, xq = tid % G::kQ, xr = tid / G::kQ;
  const int wdst = wr * G::kWRowBytes + (G::kNvfp4 || G::kFp8 ? wq : chunk_at<G::kQ>(wr, wq)) * 16;
  const int xdst = xr * G::kXRowBytes + chunk_at<G::kQ>(xr, xq) * 16;
  const auto load_step = [&](int buf, int kt) {
    uint8_t* ws = piece_smem + buf * G::kStageBytes;
    uint8_t* ss = ws + G::kWBytes;
    uint8_t* xs = ss + G::kSBytes;
#pragma unroll
    for (int i = 0; i < kWCopies; ++i) {
      const int r = wr + (i % (G::kRows / kWStep)) * kWStep;
      const uint8_t* w = i < G::kRows / kWStep ? w0 : w1;
      cp_async16(ws + wdst + i * kWStep * G::kWRowBytes, w + size_t(r) * G::kGlobalRowBytes + kt * G::kWRowBytes + wq * 16);
    }
    if constexpr (G::kNvfp4) {
      constexpr int kScaleRow = (G::kBK * G::kSteps) / 16;  // a global row's NVFP4 scale codes
      const uint8_t* src = tid < G::kRows ? s0 + size_t(tid) * kScaleRow : s1 + size_t(tid - G::kRows) * kScaleRow;
      cp_async_small<G::kSRowBytes>(ss + tid * G::kSRowBytes, src + kt * G::kSRowBytes);
    }
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      const int row = rows_s[xr + i * kXStep];
      const __nv_bfloat16* src = x + size_t(row < 0 ? 0 : row) * (G::kBK * G::kSteps) + kt * G::kBK + xq * 8;
      cp_async16(xs + xdst + i * kXStep * G::kXRowBytes, src, row >= 0);
    }
  };

#pragma unroll
  for (int s = 0; s < G::kStages - 1; ++s) {
    if (s < G::kSteps) load_step(s, s);
    cp_async_commit();
  }

#pragma unroll 1
  for (int kt = 0; kt < G::kSteps; ++kt) {
    cp_async_wait<G::kStages - 2>();
    __syncthreads();  // step kt landed for every thread; every warp is done with step kt - 1's buffer
    if (kt + G::kStages - 1 < G::kSteps) load_step((kt + G::kStages - 1) % G::kStages, kt + G::kStages - 1);
    cp_async_commit();

    const uint8_t* ws = piece_smem + (kt % G::kStages) * G::kStageBytes;
    const uint8_t* ss = ws + G::kWBytes;
    const uint8_t* xs = ss + G::kSBytes;
    // NVFP4: this lane's code words (kO consecutive octets) and block scale codes of its four rows.
    uint32_t code[2][2][G::kO];
    uint32_t scale[2][2];
    if constexpr (G::kNvfp4) {
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = m * G::kRows + 16 * warp + g + 8 * h;
          const uint8_t* at = ws + r * G::kWRowBytes + c * 4 * G::kO;
          if constexpr (G::kO == 4) {
            const uint4 v = *reinterpret_cast<const uint4*>(at);
            code[m][h][0] = v.x, code[m][h][1] = v.y, code[m][h][2] = v.z, code[m][h][3] = v.w;
            scale[m][h] = *reinterpret_cast<const uint16_t*>(ss + r * G::kSRowBytes + 2 * c);
          } else if constexpr (G::kO == 2) {
            const uint2 v = *reinterpret_cast<const uint2*>(at);
            code[m][h][0] = v.x, code[m][h][1] = v.y;
            scale[m][h] = ss[r * G::kSRowBytes + c];
          } else {
            static_assert(G::kO == 4 || G::kO == 2, "piece gemm: NVFP4 steps of 64 or 128 columns");
          }
        }
    }
    // FP8: this lane's 16 weight bytes (2 octets) of its four rows (64-byte rows: the eight lanes of a
    // phase read eight distinct 16-byte bank groups), and each half's block scale for this step.
    uint4 code8[2][2];
    float block_scale[2];
    if constexpr (G::kFp8) {
#pragma unroll
      for (int m = 0; m < 2; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) code8[m][h] = lds128(ws + (m * G::kRows + 16 * warp + g + 8 * h) * G::kWRowBytes + c * 16);
        block_scale[m] = __ldg(reinterpret_cast<const float*>(m ? s1 : s0) + kt * G::kBK / tiling::kFp8Block);
      }
    }
#pragma unroll
    for (int o = 0; o < G::kO; ++o) {
      uint32_t a[2][2][4];  // [half][row g / g + 8][pair]: the octet's bf16 weight pairs
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if constexpr (G::kNvfp4) {
            uint32_t img[4];
            nvfp4_code::images(code[m][h][o], img);
            const uint32_t sw = nvfp4_scale_word(scale[m][h], o / 2);
#pragma unroll
            for (int p = 0; p < 4; ++p) a[m][h][p] = nvfp4_scaled(img[p], sw);
          } else if constexpr (G::kFp8) {
            const uint4 v = code8[m][h];
            fp8_scaled_quad(o == 0 ? v.x : v.z, block_scale[m], a[m][h][0], a[m][h][1]);
            fp8_scaled_quad(o == 0 ? v.y : v.w, block_scale[m], a[m][h][2], a[m][h][3]);
          } else {
            const int r = m * G::kRows + 16 * warp + g + 8 * h;
            const uint4 v = lds128(ws + r * G::kWRowBytes + chunk_at<G::kQ>(r, c * G::kO + o) * 16);
            a[m][h][0] = v.x, a[m][h][1] = v.y, a[m][h][2] = v.z, a[m][h][3] = v.w;
          }
        }
      // Token groups in pairs: the rows of a group past the item are zeros, so a pair may run one
      // group more than jmax. Each accumulator still sees its k in the same order (half 0, then 1); the
      // other three tiles of the pair sit between its two mma, so none waits on the one before.
      const uint8_t* xo = xs + g * G::kXRowBytes + chunk_at<G::kQ>(g, c * G::kO + o) * 16;  // rows 8j + g share g's parity
#pragma unroll
      for (int j = 0; j < 8; j += 2) {
        if (j < jmax) {
          const uint4 x0 = *reinterpret_cast<const uint4*>(xo + 8 * j * G::kXRowBytes);
          const uint4 x1 = *reinterpret_cast<const uint4*>(xo + 8 * (j + 1) * G::kXRowBytes);
          const uint32_t b[2][2][2] = {{{x0.x, x0.y}, {x0.z, x0.w}}, {{x1.x, x1.y}, {x1.z, x1.w}}};  // [group][half][reg]
#pragma unroll
          for (int half = 0; half < 2; ++half)
#pragma unroll
            for (int m = 0; m < 2; ++m) {
              const uint32_t frag[4] = {a[m][0][2 * half], a[m][1][2 * half], a[m][0][2 * half + 1], a[m][1][2 * half + 1]};
#pragma unroll
              for (int jj = 0; jj < 2; ++jj) mma_bf16_16816(acc[m][j + jj], frag, b[jj][half][0], b[jj][half][1]);
            }
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's shared memory is free for the epilogue
}

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

// gate_up epilogue: act row (token) i of the item, columns n0.. of the N-tile, = bf16(silu(gate *
// gate_factor) * (up * up_factor)), as moe_gate_up's store_act; through shared memory so every global
// store is 16 contiguous bytes.
template <class G, int kPitch>
__device__ __forceinline__ void store_act(const float (&acc)[2][8][4], float gate_factor, float up_factor, int rows,
                                          __nv_bfloat16* dst, int dst_pitch, uint8_t* piece_smem) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int token = 8 * j + 2 * c + (q & 1), i = 16 * warp + g + 8 * (q >> 1);
      const float v = silu(acc[0][j][q] * gate_factor) * (acc[1][j][q] * up_factor);
      *reinterpret_cast<__nv_bfloat16*>(piece_smem + token * kPitch + 2 * i) = __float2bfloat16_rn(v);
    }
  __syncthreads();
  constexpr int kChunks = G::kRows / 8;  // 16-byte chunks per token row
  for (int i = tid; i < rows * kChunks; i += G::kThreads) {
    const int token = i / kChunks, q = i % kChunks;
    *reinterpret_cast<uint4*>(dst + size_t(token) * dst_pitch + q * 8) = *reinterpret_cast<const uint4*>(piece_smem + token * kPitch + q * 16);
  }
}

// down epilogue: y row (token) i of the item, 2 x kRows columns from n0, = acc * factor in fp32.
template <class G, int kPitch>
__device__ __forceinline__ void store_y(const float (&acc)[2][8][4], float factor, int rows, float* dst, int dst_pitch,
                                        uint8_t* piece_smem) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int token = 8 * j + 2 * c + (q & 1), i = m * G::kRows + 16 * warp + g + 8 * (q >> 1);
        *reinterpret_cast<float*>(piece_smem + token * kPitch + 4 * i) = acc[m][j][q] * factor;
      }
  __syncthreads();
  constexpr int kChunks = 2 * G::kRows / 4;
  for (int i = tid; i < rows * kChunks; i += G::kThreads) {
    const int token = i / kChunks, q = i % kChunks;
    *reinterpret_cast<float4*>(dst + size_t(token) * dst_pitch + q * 4) = *reinterpret_cast<const float4*>(piece_smem + token * kPitch + q * 16);
  }
}

// Exclusive scan over the block of one int64 per thread (counts in the low half, items in the high).
template <int kThreads>
__device__ __forceinline__ long long block_exclusive_scan(long long v, long long* warp_total, long long& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  long long inclusive = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const long long u = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += u;
  }
  if (lane == 31) warp_total[warp] = inclusive;
  __syncthreads();
  long long before = 0;
  total = 0;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w < warp) before += warp_total[w];
    total += warp_total[w];
  }
  return before + inclusive - v;
}

}  // namespace piece

// ---------------------------------------------------------------------------------------------------
// CUDA kernels

// One warp per token: its routing, its bits and counts, its shared-expert gate.
template <class D, Precision P, Precision PS>
__global__ void __launch_bounds__(MoePieceTraits<D, P, PS>::kRouteWarps * 32)
    moe_piece_route_kernel(const __grid_constant__ MoePieceParams p, const __grid_constant__ MoePieceWork w, int n) {
  using T = MoePieceTraits<D, P, PS>;
  __shared__ int choice[T::kRouteWarps][D::kTopK];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t = blockIdx.x * T::kRouteWarps + warp;
  if (t >= n) return;
  router_row<D::kExperts, D::kTopK>(p.logits + size_t(t) * D::kExperts, p.route_idx + size_t(t) * D::kTopK,
                                    p.route_w + size_t(t) * D::kTopK, choice[warp], lane);
  __syncwarp();
  if (lane < D::kTopK) {
    const int e = choice[warp][lane];
    atomicOr(&w.bits[size_t(e) * w.bit_words + t / 32], 1u << (t % 32));
    atomicAdd(&w.counts[e], 1);
  }
  // sigmoid(shared_expert_gate . x[t]): decode's functions (moe_shared_gate.cuh), so bit for bit its scale.
  const float dot = shared_gate_dot<D::kHidden>(p.shared_expert_gate, p.x + size_t(t) * D::kHidden, lane);
  if (lane == 0) w.shared_scale[t] = shared_gate_scale(dot);
}

// Every block scans all counts (experts' first slots and first items); warp v of block b then sorts
// expert b * warps + v: its bitmap's set bits in token order are its slots.
template <class D, Precision P, Precision PS>
__global__ void __launch_bounds__(MoePieceTraits<D, P, PS>::kGroupThreads)
    moe_piece_group_kernel(const __grid_constant__ MoePieceParams p, const __grid_constant__ MoePieceWork w, int n) {
  using T = MoePieceTraits<D, P, PS>;
  __shared__ long long warp_total[T::kGroupThreads / 32];
  __shared__ int first_slot[D::kExperts], first_item[D::kExperts];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int count = tid < D::kExperts ? w.counts[tid] : 0;
  const long long packed = count | (long long)((count + T::kTokens - 1) / T::kTokens) << 32;
  long long total;
  const long long before = piece::block_exclusive_scan<T::kGroupThreads>(packed, warp_total, total);
  if (tid < D::kExperts) {
    first_slot[tid] = int(before & 0xffffffff);
    first_item[tid] = int(before >> 32);
    if (blockIdx.x == 0) w.expert_start[tid] = first_slot[tid];
  }
  if (blockIdx.x == 0 && tid == 0) {
    w.expert_start[D::kExperts] = int(total & 0xffffffff);
    *w.item_count = int(total >> 32);
  }
  __syncthreads();

  const int e = blockIdx.x * T::kGroupExpertsPerBlock + warp;
  if (e >= D::kExperts) return;
  const int e_count = w.counts[e];
  for (int i = lane; i * T::kTokens < e_count; i += 32)
    w.items[first_item[e] + i] = make_int4(e, first_slot[e] + i * T::kTokens, min(T::kTokens, e_count - i * T::kTokens), 0);
  const int words = (n + 31) / 32;
  int base = first_slot[e];
  for (int w0 = 0; w0 < words; w0 += 32) {
    uint32_t word = w0 + lane < words ? w.bits[size_t(e) * w.bit_words + w0 + lane] : 0u;
    const int pc = __popc(word);
    int inclusive = pc;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int u = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += u;
    }
    int slot = base + inclusive - pc;
    while (word) {
      const int t = 32 * (w0 + lane) + __ffs(word) - 1;
      word &= word - 1;
      w.slot_token[slot] = t;
#pragma unroll
      for (int k = 0; k < D::kTopK; ++k)
        if (p.route_idx[size_t(t) * D::kTopK + k] == e) w.slot_of[size_t(t) * D::kTopK + k] = slot;
      ++slot;
    }
    base += __shfl_sync(0xffffffffu, inclusive, 31);
  }
}

// Block (N-tile, item): items [0, shared items) are the shared expert's, over tokens 64 y..; the rest
// are routed items while y - shared items < item_count.
template <class D, Precision P, Precision PS>
__global__ void __launch_bounds__(MoePieceTraits<D, P, PS>::kGateUpThreads, 2)
    moe_piece_gate_up_kernel(const __grid_constant__ MoePieceParams p, const __grid_constant__ MoePieceWork w, int n) {
  using T = MoePieceTraits<D, P, PS>;
  using G = typename T::GateUp;
  using S = typename T::SharedGateUp;
  extern __shared__ __align__(128) uint8_t piece_smem[];
  __shared__ int rows_s[T::kTokens];
  const int shared_items = (n + T::kTokens - 1) / T::kTokens;
  const int n0 = blockIdx.x * G::kRows;
  float acc[2][8][4];
  if (int(blockIdx.y) < shared_items) {
    if (n0 >= D::kSharedInter) return;
    const int t0 = blockIdx.y * T::kTokens, rows = min(T::kTokens, n - t0);
    for (int i = threadIdx.x; i < T::kTokens; i += blockDim.x) rows_s[i] = i < rows ? t0 + i : -1;
    __syncthreads();
    using SW = WeightTileTraits<PS>;
    const auto* gate = reinterpret_cast<const uint8_t*>(p.shared_gate) + size_t(n0) * S::kGlobalRowBytes;
    const auto* up = reinterpret_cast<const uint8_t*>(p.shared_up) + size_t(n0) * S::kGlobalRowBytes;
    const uint8_t* gs = SW::kFp8 ? reinterpret_cast<const uint8_t*>(p.shared_gate_block_scale) + SW::template scale_at<D::kHidden>(n0) : nullptr;
    const uint8_t* us = SW::kFp8 ? reinterpret_cast<const uint8_t*>(p.shared_up_block_scale) + SW::template scale_at<D::kHidden>(n0) : nullptr;
    piece::piece_gemm<S>(gate, up, gs, us, p.x, rows_s, (rows + 7) / 8, piece_smem, acc);
    piece::store_act<S, T::kActPitch>(acc, 1.0f, 1.0f, rows, w.shared_act + size_t(t0) * D::kSharedInter + n0,
                                          D::kSharedInter, piece_smem);
    return;
  }
  const int item = blockIdx.y - shared_items;
  if (item >= *w.item_count || n0 >= D::kInter) return;
  const int4 it = w.items[item];  // expert, first slot, rows
  for (int i = threadIdx.x; i < T::kTokens; i += blockDim.x) rows_s[i] = i < it.z ? w.slot_token[it.y + i] : -1;
  __syncthreads();
  const uint8_t* unit = p.experts + uint64_t(it.x) * p.expert_stride;
  using W = WeightTileTraits<P>;
  constexpr size_t kRowBytes = G::kGlobalRowBytes;
  const size_t s_at = W::template scale_at<D::kHidden>(n0);
  float gate_factor = 1.0f, up_factor = 1.0f;
  if constexpr (G::kNvfp4) {
    gate_factor = *reinterpret_cast<const float*>(unit + p.expert.gate.scale2) * kNvfp4Unbias;
    up_factor = *reinterpret_cast<const float*>(unit + p.expert.up.scale2) * kNvfp4Unbias;
  }
  piece::piece_gemm<G>(unit + p.expert.gate.weight + n0 * kRowBytes, unit + p.expert.up.weight + n0 * kRowBytes,
                           unit + p.expert.gate.scale + s_at, unit + p.expert.up.scale + s_at,
                           p.x, rows_s, (it.z + 7) / 8, piece_smem, acc);
  piece::store_act<G, T::kActPitch>(acc, gate_factor, up_factor, it.z, w.act + size_t(it.y) * D::kInter + n0, D::kInter, piece_smem);
}

template <class D, Precision P, Precision PS>
__global__ void __launch_bounds__(MoePieceTraits<D, P, PS>::kDownThreads, 2)
    moe_piece_down_kernel(const __grid_constant__ MoePieceParams p, const __grid_constant__ MoePieceWork w, int n) {
  using T = MoePieceTraits<D, P, PS>;
  using G = typename T::Down;
  using S = typename T::SharedDown;
  extern __shared__ __align__(128) uint8_t piece_smem[];
  __shared__ int rows_s[T::kTokens];
  const int shared_items = (n + T::kTokens - 1) / T::kTokens;
  const int n0 = blockIdx.x * 2 * G::kRows;
  float acc[2][8][4];
  if (int(blockIdx.y) < shared_items) {
    const int t0 = blockIdx.y * T::kTokens, rows = min(T::kTokens, n - t0);
    for (int i = threadIdx.x; i < T::kTokens; i += blockDim.x) rows_s[i] = i < rows ? t0 + i : -1;
    __syncthreads();
    using SW = WeightTileTraits<PS>;
    const auto* down = reinterpret_cast<const uint8_t*>(p.shared_down) + size_t(n0) * S::kGlobalRowBytes;
    const auto* ds = reinterpret_cast<const uint8_t*>(p.shared_down_block_scale);
    piece::piece_gemm<S>(down, down + S::kRows * S::kGlobalRowBytes, SW::kFp8 ? ds + SW::template scale_at<D::kSharedInter>(n0) : nullptr,
                         SW::kFp8 ? ds + SW::template scale_at<D::kSharedInter>(n0 + S::kRows) : nullptr, w.shared_act, rows_s,
                         (rows + 7) / 8, piece_smem, acc);
    piece::store_y<S, T::kYPitch>(acc, 1.0f, rows, w.shared_y + size_t(t0) * D::kHidden + n0, D::kHidden, piece_smem);
    return;
  }
  const int item = blockIdx.y - shared_items;
  if (item >= *w.item_count) return;
  const int4 it = w.items[item];
  for (int i = threadIdx.x; i < T::kTokens; i += blockDim.x) rows_s[i] = i < it.z ? it.y + i : -1;
  __syncthreads();
  const uint8_t* unit = p.experts + uint64_t(it.x) * p.expert_stride;
  using W = WeightTileTraits<P>;
  constexpr size_t kRowBytes = G::kGlobalRowBytes;
  float factor = 1.0f;
  if constexpr (G::kNvfp4) factor = *reinterpret_cast<const float*>(unit + p.expert.down.scale2) * kNvfp4Unbias;
  const uint8_t* wd = unit + p.expert.down.weight + n0 * kRowBytes;
  const uint8_t* sd = unit + p.expert.down.scale;
  piece::piece_gemm<G>(wd, wd + G::kRows * kRowBytes, sd + W::template scale_at<D::kInter>(n0),
                       sd + W::template scale_at<D::kInter>(n0 + G::kRows), w.act, rows_s, (it.z + 7) / 8, piece_smem, acc);
  piece::store_y<G, T::kYPitch>(acc, factor, it.z, w.y + size_t(it.y) * D::kHidden + n0, D::kHidden, piece_smem);
}

// One block per token: out = bf16(shared_scale * shared + sum over choices of weight * down), in
// moe_down's order.
template <class D, Precision P, Precision PS>
__global__ void __launch_bounds__(MoePieceTraits<D, P, PS>::kCombineThreads)
    moe_piece_combine_kernel(const __grid_constant__ MoePieceParams p, const __grid_constant__ MoePieceWork w, int n) {
  using T = MoePieceTraits<D, P, PS>;
  const int t = blockIdx.x;
  int slot[D::kTopK];
  float weight[D::kTopK];
#pragma unroll
  for (int k = 0; k < D::kTopK; ++k) {
    slot[k] = w.slot_of[size_t(t) * D::kTopK + k];
    weight[k] = p.route_w[size_t(t) * D::kTopK + k];
  }
  const float scale = w.shared_scale[t];
  for (int j = 4 * threadIdx.x; j < D::kHidden; j += 4 * T::kCombineThreads) {
    const float4 s = *reinterpret_cast<const float4*>(w.shared_y + size_t(t) * D::kHidden + j);
    float y[4] = {scale * s.x, scale * s.y, scale * s.z, scale * s.w};
#pragma unroll
    for (int k = 0; k < D::kTopK; ++k) {
      const float4 v = *reinterpret_cast<const float4*>(w.y + size_t(slot[k]) * D::kHidden + j);
      y[0] += weight[k] * v.x;
      y[1] += weight[k] * v.y;
      y[2] += weight[k] * v.z;
      y[3] += weight[k] * v.w;
    }
    const __nv_bfloat162 lo = __floats2bfloat162_rn(y[0], y[1]), hi = __floats2bfloat162_rn(y[2], y[3]);
    uint2 packed;
    packed.x = *reinterpret_cast<const uint32_t*>(&lo);
    packed.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(p.out + size_t(t) * D::kHidden + j) = packed;
  }
}

// ---------------------------------------------------------------------------------------------------
// kernel launchers

template <class D>
MoePieceWork moe_piece_work(const MoePieceParams& p) {
  const tiling::MoePieceWorkspace l = tiling::moe_piece_workspace(D::kDims, p.max_tokens);
  auto* base = static_cast<uint8_t*>(p.workspace);
  return MoePieceWork{.counts = reinterpret_cast<int*>(base + l.counts),
                      .bits = reinterpret_cast<uint32_t*>(base + l.bits),
                      .bit_words = l.bit_words,
                      .expert_start = reinterpret_cast<int*>(base + l.expert_start),
                      .item_count = reinterpret_cast<int*>(base + l.item_count),
                      .items = reinterpret_cast<int4*>(base + l.items),
                      .slot_token = reinterpret_cast<int*>(base + l.slot_token),
                      .slot_of = reinterpret_cast<int*>(base + l.slot_of),
                      .shared_scale = reinterpret_cast<float*>(base + l.shared_scale),
                      .act = reinterpret_cast<__nv_bfloat16*>(base + l.act),
                      .shared_act = reinterpret_cast<__nv_bfloat16*>(base + l.shared_act),
                      .y = reinterpret_cast<float*>(base + l.y),
                      .shared_y = reinterpret_cast<float*>(base + l.shared_y)};
}

// The piece's five phases, each its own launcher so a check can time them apart; moe_piece runs all.
// REQUIRES (each): device pointers; 1 <= n <= p.max_tokens; finite logits; the phases in this order
// on one stream.
template <class D, Precision P, Precision PS = Precision::kBF16>
void moe_piece_route(const MoePieceParams& p, int n, cudaStream_t stream) {
  using T = MoePieceTraits<D, P, PS>;
  CHECK(n >= 1 && n <= p.max_tokens, "moe piece: n outside [1, max_tokens]");
  const MoePieceWork w = moe_piece_work<D>(p);
  CUDA_CHECK(cudaMemsetAsync(p.workspace, 0, tiling::moe_piece_workspace(D::kDims, p.max_tokens).zeroed_bytes(), stream));
  moe_piece_route_kernel<D, P, PS><<<(n + T::kRouteWarps - 1) / T::kRouteWarps, T::kRouteWarps * 32, 0, stream>>>(p, w, n);
  CUDA_CHECK_LAUNCH();
}

template <class D, Precision P, Precision PS = Precision::kBF16>
void moe_piece_group(const MoePieceParams& p, int n, cudaStream_t stream) {
  using T = MoePieceTraits<D, P, PS>;
  const int blocks = (D::kExperts + T::kGroupExpertsPerBlock - 1) / T::kGroupExpertsPerBlock;
  moe_piece_group_kernel<D, P, PS><<<blocks, T::kGroupThreads, 0, stream>>>(p, moe_piece_work<D>(p), n);
  CUDA_CHECK_LAUNCH();
}

// The first call per instantiation sets the kernel's shared-memory limit: make it before any capture.
template <class D, Precision P, Precision PS = Precision::kBF16>
void moe_piece_gate_up(const MoePieceParams& p, int n, cudaStream_t stream) {
  using T = MoePieceTraits<D, P, PS>;
  raise_smem_limit_once<moe_piece_gate_up_kernel<D, P, PS>>(T::kGateUpSmem);
  const dim3 grid(T::kTiling.gate_up_n_tiles, tiling::moe_piece_shared_items(D::kDims, n) + tiling::moe_piece_routed_items(D::kDims, n));
  moe_piece_gate_up_kernel<D, P, PS><<<grid, T::kGateUpThreads, T::kGateUpSmem, stream>>>(p, moe_piece_work<D>(p), n);
  CUDA_CHECK_LAUNCH();
}

template <class D, Precision P, Precision PS = Precision::kBF16>
void moe_piece_down(const MoePieceParams& p, int n, cudaStream_t stream) {
  using T = MoePieceTraits<D, P, PS>;
  raise_smem_limit_once<moe_piece_down_kernel<D, P, PS>>(T::kDownSmem);
  const dim3 grid(T::kTiling.down_n_tiles, tiling::moe_piece_shared_items(D::kDims, n) + tiling::moe_piece_routed_items(D::kDims, n));
  moe_piece_down_kernel<D, P, PS><<<grid, T::kDownThreads, T::kDownSmem, stream>>>(p, moe_piece_work<D>(p), n);
  CUDA_CHECK_LAUNCH();
}

template <class D, Precision P, Precision PS = Precision::kBF16>
void moe_piece_combine(const MoePieceParams& p, int n, cudaStream_t stream) {
  using T = MoePieceTraits<D, P, PS>;
  moe_piece_combine_kernel<D, P, PS><<<n, T::kCombineThreads, 0, stream>>>(p, moe_piece_work<D>(p), n);
  CUDA_CHECK_LAUNCH();
}

// The MoE block of a piece of n tokens: route_idx / route_w and out, as moe_route + moe_gate_up +
// moe_down compute them for a decode bucket.
template <class D, Precision P, Precision PS = Precision::kBF16>
void moe_piece(const MoePieceParams& p, int n, cudaStream_t stream) {
  moe_piece_route<D, P, PS>(p, n, stream);
  moe_piece_group<D, P, PS>(p, n, stream);
  moe_piece_gate_up<D, P, PS>(p, n, stream);
  moe_piece_down<D, P, PS>(p, n, stream);
  moe_piece_combine<D, P, PS>(p, n, stream);
}

}  // namespace rocket::cuda
