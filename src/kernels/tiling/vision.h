// The vision tower's device memory on the H200 (kernels/cuda/vision_tower.cuh) as plain arithmetic, so
// the compiler sizes the plan's vision buffers (compiler/memory_map.cc) with the bytes the kernels carve:
//
//   scratch  VisionTowerBuffers for `patches` patches: act, normed, wide, q, k, v, attn, hidden, merged
//            (vision_tower_scratch_bytes delegates here; vision_tower_buffers carves in this order)
//   inputs   one forward's VisionTowerInputs in one buffer: pixels, tap rows, tap weights, cos, sin,
//            attention tiles
//
// Every part starts 256-byte aligned. One forward is one image (or one frame set) of at most `patches`
// patches; a still image's patches are grid_h · grid_w, its pixels over patch².
#pragma once

#include <cstdint>

#include "kernels/tiling/booster.h"

namespace rocket::tiling {

// The tower's shapes as the kernels take them (VisionTowerConfig's; patch_dim = 3 · temporal · patch²).
struct VisionDims {
  int hidden = 0, heads = 0, head_dim = 0, intermediate = 0, patch_dim = 0, merge = 0, out_hidden = 0;
};

constexpr uint64_t kVisionPartAlign = 256;
constexpr uint64_t vision_part_bytes(uint64_t bytes) {
  return (bytes + kVisionPartAlign - 1) / kVisionPartAlign * kVisionPartAlign;
}

// q, k and v rows padded to whole mma k-steps of 16 (72 → 80).
constexpr int vision_padded_head_dim(int head_dim) { return (head_dim + 15) / 16 * 16; }

// Query rows of one attention block (vision_tower.cuh kVisionQueryTile: 8 warps × 16 rows).
constexpr int kVisionQueryRows = 128;

// The head dims vision_attention_kernel is instantiated for (vision_tower.cuh vision_tower_forward):
// 16, the tiny fuel's; 72, the releases' (1152 / 16).
constexpr bool vision_attention_head_dim(int head_dim) { return head_dim == 16 || head_dim == 72; }

// Offsets of VisionTowerBuffers' parts from the scratch buffer's start, and its bytes.
struct VisionScratchLayout {
  uint64_t act = 0, normed = 0, wide = 0, q = 0, k = 0, v = 0, attn = 0, hidden = 0, merged = 0, bytes = 0;
};

constexpr VisionScratchLayout vision_scratch_layout(const VisionDims& d, int64_t patches) {
  const uint64_t n = uint64_t(patches), h = uint64_t(d.hidden);
  const uint64_t act = uint64_t(max(max(d.patch_dim, d.intermediate), d.hidden));
  const uint64_t wide = uint64_t(max(3 * d.hidden, d.intermediate));
  const uint64_t qkv = uint64_t(d.heads) * n * uint64_t(vision_padded_head_dim(d.head_dim)) * 2;
  VisionScratchLayout l;
  uint64_t at = 0;
  const auto take = [&at](uint64_t bytes) {
    const uint64_t offset = at;
    at += vision_part_bytes(bytes);
    return offset;
  };
  l.act = take(n * act * 2);       // bf16 [patches][max(patch_dim, intermediate, hidden)]: a GEMM's input
  l.normed = take(n * h * 2);      // bf16 [patches][hidden]: a LayerNorm's output
  l.wide = take(n * wide * 4);     // fp32 [patches][max(3 hidden, intermediate)]: a GEMM's output
  l.q = take(qkv);                 // bf16 [heads][patches][padded head_dim], each of q, k, v
  l.k = take(qkv);
  l.v = take(qkv);
  l.attn = take(n * h * 2);        // bf16 [patches][hidden]: the attention's output
  l.hidden = take(n * h * 4);      // fp32 [patches][hidden]: the residual stream, then the last block's output
  l.merged = take(n / uint64_t(d.merge * d.merge) * uint64_t(d.out_hidden) * 4);  // fp32 [patches / merge²][out_hidden]
  l.bytes = at;
  return l;
}

// The attention's query tiles for `patches` patches at most: each frame takes ceil(len / 128) tiles, at
// most one of them partial, and a frame is at least merge² patches, so ceil(patches / 128) + patches /
// merge² bounds every split of `patches` into frames.
constexpr int vision_max_tiles(int64_t patches, int merge) {
  return int((patches + kVisionQueryRows - 1) / kVisionQueryRows + patches / (int64_t(merge) * merge));
}

// Offsets of one forward's inputs (VisionTowerInputs) in one device buffer, in upload order, and its bytes.
struct VisionInputsLayout {
  uint64_t pixels = 0;       // fp32 [patches][patch_dim]: the processor's pixel values
  uint64_t tap_rows = 0;     // int32x4 [patches]: the position table's four taps (PositionTaps::row)
  uint64_t tap_weights = 0;  // float4 [patches]: their weights
  uint64_t cos = 0;          // fp32 [patches][head_dim / 2]: the 2-D rotary
  uint64_t sin = 0;          // fp32 [patches][head_dim / 2]
  uint64_t tiles = 0;        // int32x4 [max_tiles]: the attention's query tiles (vision_attention_tiles)
  uint64_t bytes = 0;
  int max_tiles = 0;
};

constexpr VisionInputsLayout vision_inputs_layout(int64_t patches, int patch_dim, int head_dim, int merge) {
  const uint64_t n = uint64_t(patches);
  VisionInputsLayout l;
  l.max_tiles = vision_max_tiles(patches, merge);
  uint64_t at = 0;
  const auto take = [&at](uint64_t bytes) {
    const uint64_t offset = at;
    at += vision_part_bytes(bytes);
    return offset;
  };
  l.pixels = take(n * uint64_t(patch_dim) * 4);
  l.tap_rows = take(n * 16);
  l.tap_weights = take(n * 16);
  l.cos = take(n * uint64_t(head_dim / 2) * 4);
  l.sin = take(n * uint64_t(head_dim / 2) * 4);
  l.tiles = take(uint64_t(l.max_tiles) * 16);
  l.bytes = at;
  return l;
}

constexpr uint64_t vision_inputs_bytes(int64_t patches, int patch_dim, int head_dim, int merge) {
  return vision_inputs_layout(patches, patch_dim, head_dim, merge).bytes;
}

// The releases' tower (1152 wide, 16 heads of 72, intermediate 4304, 1536-wide patches, 2×2 merge into
// 2048) over one 1024² image: 4096 patches.
static_assert(vision_scratch_layout({1152, 16, 72, 4304, 1536, 2, 2048}, 4096).q == 4096ull * 4304 * 2 + 4096ull * 1152 * 2 +
                                                                                          4096ull * 4304 * 4);
static_assert(vision_inputs_layout(4096, 1536, 72, 2).max_tiles == 32 + 1024);
static_assert(vision_inputs_layout(4096, 1536, 72, 2).tiles % kVisionPartAlign == 0);

}  // namespace rocket::tiling
