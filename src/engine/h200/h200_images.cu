#include "engine/h200/h200_images.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/cuda/primitives/cuda_check.h"
#include "vision/mrope_positions.h"
#ifdef ROCKET_VISION_TOWER
#include "kernels/cuda/vision_tower.cuh"
#include "kernels/tiling/vision.h"
#endif

namespace rocket {

using namespace engine;

#ifdef ROCKET_VISION_TOWER
struct H200Images::Tower {
  cuda::VisionTowerShape shape;
  cuda::VisionTowerWeights weights;
};
#else
struct H200Images::Tower {};
#endif

H200Images::H200Images(H200Runner& run) : run_(run), slots_(size_t(H200Runner::kSlots)) {}

H200Images::~H200Images() = default;

void H200Images::forget(int slot) {
  pin(slots_.at(size_t(slot)), -1);
  slots_[size_t(slot)] = Slot{};
}

void H200Images::copy(int from_slot, int to_slot) {
  forget(to_slot);
  slots_.at(size_t(to_slot)) = slots_.at(size_t(from_slot));
  pin(slots_[size_t(to_slot)], +1);
}

H200Images::Cached* H200Images::find_cached(const ImageDigest& digest, int64_t tokens) {
  for (Cached& c : cache_)
    if (c.digest == digest && c.tokens == tokens) return &c;
  return nullptr;
}

void H200Images::pin(const Slot& s, int delta) {
  for (const Image& im : s.images)
    if (im.pinned) {
      Cached* c = find_cached(im.digest, im.tokens);
      CHECK(c && c->pins + delta >= 0, "a pinned image's encoder cache entry is gone");
      c->pins += delta;
    }
}

int64_t H200Images::rope_delta(int slot) const { return slots_.at(size_t(slot)).delta; }

cuda::RopePosition H200Images::rope_at(int slot, int64_t pos) const {
  const Slot& s = slots_[size_t(slot)];
  if (pos < int64_t(s.positions.size())) return s.positions[size_t(pos)];
  return cuda::RopePosition::text(int32_t(pos + s.delta));
}

void H200Images::set(int slot, std::span<const int32_t> prompt, const vision::PromptImages& images, int64_t computed) {
  CHECK(slot >= 0 && slot < kMaxStreams);
  forget(slot);
  if (images.empty()) return;
#ifndef ROCKET_VISION_TOWER
  (void)prompt, (void)computed;
  // NOTE: Error composed by hand: nvcc compiles this file, and fmt (fail()) does not compile under it.
  throw Error("image input: this engine's plan carries no vision tower (build it from a fuel that holds one)");
#else
  if (int64_t(prompt.size()) > kMaxContext)
    throw Error("image input: a prompt of " + std::to_string(prompt.size()) + " tokens exceeds the plan's context " +
                std::to_string(kMaxContext));
  const vision::MropePositions m = vision::mrope_positions(prompt, int32_t(kImageToken), images.grids, int(kVisionMerge));
  Slot s;
  int64_t patches = 0;
  for (const vision::ImageGrid& g : images.grids) {
    if (g.patches() > kVisionMaxPatches)
      throw Error("image input: an image of " + std::to_string(g.patches()) + " patches exceeds the plan's bound of " +
                  std::to_string(kVisionMaxPatches) + " (its processor's max_pixels)");
    patches += g.patches();
  }
  if (int64_t(images.patches.size()) != patches * kVisionPatchDim)
    throw Error("image input: " + std::to_string(images.patches.size()) + " patch values for " + std::to_string(patches) +
                " patches of " + std::to_string(kVisionPatchDim));
  // Each image's run of tokens, in order (mrope_positions refused a prompt whose runs are not the
  // images'); one wholly before `computed` is in the slot's state already and is never read.
  int64_t patch = 0;
  size_t i = 0;
  for (const vision::ImageGrid& g : images.grids) {
    while (prompt[i] != int32_t(kImageToken)) ++i;
    const size_t index = size_t(&g - images.grids.data());
    Image im{.first = int64_t(i), .tokens = g.patches() / (kVisionMerge * kVisionMerge), .patch0 = 0, .grid = g,
             .keyed = index < images.digests.size(), .digest = index < images.digests.size() ? images.digests[index] : ImageDigest{}};
    i += size_t(im.tokens);
    if (im.first + im.tokens > computed) {
      // An image the encoder cache holds is read from there: its entry pinned, no patches kept.
      im.pinned = im.keyed && find_cached(im.digest, im.tokens);
      if (!im.pinned) {
        im.patch0 = int64_t(s.patches.size()) / kVisionPatchDim;
        s.patches.insert(s.patches.end(), images.patches.begin() + patch * kVisionPatchDim,
                         images.patches.begin() + (patch + g.patches()) * kVisionPatchDim);
      }
      s.images.push_back(im);
    }
    patch += g.patches();
  }
  s.positions.reserve(m.positions.size());
  for (const host::MropePosition& p : m.positions) s.positions.push_back({int32_t(p.t), int32_t(p.h), int32_t(p.w)});
  s.delta = m.delta;
  pin(s, +1);
  slots_[size_t(slot)] = std::move(s);
#endif
}

void H200Images::stage(int slot, int64_t pos0, int n, int row0, int32_t* ids, cuda::RopePosition* rope) {
  const Slot& s = slots_[size_t(slot)];
  for (int r = 0; r < n; ++r) rope[r] = rope_at(slot, pos0 + r);
  for (const Image& im : s.images) {
    const int64_t from = std::max(pos0, im.first), to = std::min(pos0 + n, im.first + im.tokens);
    if (from >= to) continue;
#ifdef ROCKET_VISION_TOWER
    if (const Cached* c = cached(s, im)) {
      for (int64_t t = from; t < to; ++t) ids[t - pos0] = int32_t(-1 - (kPrefillChunk + c->row0 + (t - im.first)));
      continue;
    }
    CHECK(row0 + (to - pos0) <= kPrefillChunk, "image rows beyond the plan's staging rows");
    const float* merged = encode(s, im);
    const int64_t k0 = row0 + (from - pos0), count = (to - from) * kHidden;
    cuda::vision_kernels::to_bf16_kernel<<<unsigned((count + 255) / 256), 256, 0, run_.stream()>>>(
        merged + (from - im.first) * kHidden, run_.buf<__nv_bfloat16>(kBuf_image_rows) + k0 * kHidden, count);
    CUDA_CHECK_LAUNCH();
    for (int64_t t = from; t < to; ++t) ids[t - pos0] = int32_t(-1 - (row0 + (t - pos0)));
#else
    (void)row0, (void)ids;
    CHECK(false, "an image in a slot of an engine without a tower");
#endif
  }
}

const H200Images::Cached* H200Images::cached(const Slot& s, const Image& im) {
  if (!im.keyed) return nullptr;
  if (Cached* c = find_cached(im.digest, im.tokens)) {
    c->used = call_;
    return c;
  }
  CHECK(!im.pinned, "a pinned image's encoder cache entry is gone");
#ifdef ROCKET_VISION_TOWER
  // Room: the first gap of im.tokens rows between the entries (in row order), evicting the least
  // recently used entry no call in flight reads until one opens.
  const int64_t rows = int64_t(kBufBytes_image_rows / (uint64_t(kHidden) * 2)) - kPrefillChunk;
  const auto gap = [&]() -> int64_t {
    std::sort(cache_.begin(), cache_.end(), [](const Cached& a, const Cached& b) { return a.row0 < b.row0; });
    int64_t end = 0;  // the end of the entry before
    for (const Cached& c : cache_) {
      if (c.row0 - end >= im.tokens) return end;
      end = c.row0 + c.tokens;
    }
    return rows - end >= im.tokens ? end : -1;
  };
  int64_t at;
  while ((at = gap()) < 0) {
    auto victim = cache_.end();
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if (it->used != call_ && it->pins == 0 && (victim == cache_.end() || it->used < victim->used)) victim = it;
    if (victim == cache_.end()) return nullptr;
    cache_.erase(victim);
  }
  const float* merged = encode(s, im);
  const int64_t count = im.tokens * kHidden;
  cuda::vision_kernels::to_bf16_kernel<<<unsigned((count + 255) / 256), 256, 0, run_.stream()>>>(
      merged, run_.buf<__nv_bfloat16>(kBuf_image_rows) + (kPrefillChunk + at) * kHidden, count);
  CUDA_CHECK_LAUNCH();
  cache_.push_back({.digest = im.digest, .row0 = at, .tokens = im.tokens, .used = call_});
  return &cache_.back();
#else
  (void)s;
  return nullptr;
#endif
}

const float* H200Images::encode(const Slot& s, const Image& im) {
#ifdef ROCKET_VISION_TOWER
  const VisionTowerConfig& c = run_.plan().vision->tower;
  if (!tower_) {
    // The tower's weights where the plan put them (BF16, `visual.*`).
    const auto at = [&](const std::string& name) { return run_.buf<const __nv_bfloat16>(run_.plan().tensor(name).offset); };
    tower_ = std::make_unique<Tower>();
    tower_->shape = {.hidden = c.hidden, .heads = c.heads, .head_dim = c.head_dim(), .intermediate = c.intermediate,
                     .depth = c.depth, .patch_dim = c.patch_dim(), .merge = c.merge, .out_hidden = c.out_hidden,
                     .tanh_gelu = c.hidden_act == "gelu_pytorch_tanh"};
    tower_->weights = cuda::vision_tower_weights(c.depth, at);
  }
  const cuda::VisionTowerShape& shape = tower_->shape;

  // The image's layout (taps, rotary tables, frames: computed on the host as the host tower does) and
  // patches into the plan's vision_inputs, at the offsets laid out for the plan's largest image.
  const int64_t patches = im.grid.patches();
  const vision::TowerLayout l = vision::tower_layout({&im.grid, 1}, c.grid_side(), c.merge, c.head_dim(), c.rope_theta);
  std::vector<int4> taps(static_cast<size_t>(patches));
  std::vector<float4> weights(static_cast<size_t>(patches));
  for (int64_t p = 0; p < patches; ++p) {
    const vision::PositionTaps& t = l.taps[size_t(p)];
    taps[size_t(p)] = make_int4(t.row[0], t.row[1], t.row[2], t.row[3]);
    weights[size_t(p)] = make_float4(t.weight[0], t.weight[1], t.weight[2], t.weight[3]);
  }
  const std::vector<int4> tiles = cuda::vision_attention_tiles(l.frames);
  const tiling::VisionInputsLayout L = tiling::vision_inputs_layout(kVisionMaxPatches, c.patch_dim(), c.head_dim(), c.merge);
  CHECK(int64_t(tiles.size()) <= L.max_tiles, "vision tower: more attention tiles than the plan laid out");
  uint8_t* base = run_.buf<uint8_t>(kBuf_vision_inputs);
  const cudaStream_t st = run_.stream();
  const auto upload = [&](uint64_t offset, const void* from, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(base + offset, from, bytes, cudaMemcpyHostToDevice, st));
  };
  upload(L.pixels, s.patches.data() + im.patch0 * c.patch_dim(), size_t(patches * c.patch_dim()) * sizeof(float));
  upload(L.tap_rows, taps.data(), taps.size() * sizeof(int4));
  upload(L.tap_weights, weights.data(), weights.size() * sizeof(float4));
  upload(L.cos, l.cos.data(), l.cos.size() * sizeof(float));
  upload(L.sin, l.sin.data(), l.sin.size() * sizeof(float));
  upload(L.tiles, tiles.data(), tiles.size() * sizeof(int4));
  const cuda::VisionTowerInputs in{.patches = int(patches),
                                   .pixels = reinterpret_cast<const float*>(base + L.pixels),
                                   .tap_rows = reinterpret_cast<const int4*>(base + L.tap_rows),
                                   .tap_weights = reinterpret_cast<const float4*>(base + L.tap_weights),
                                   .cos = reinterpret_cast<const float*>(base + L.cos),
                                   .sin = reinterpret_cast<const float*>(base + L.sin),
                                   .tiles = reinterpret_cast<const int4*>(base + L.tiles),
                                   .tile_count = int(tiles.size())};
  const cuda::VisionTowerBuffers b = cuda::vision_tower_buffers(shape, patches, run_.buf<uint8_t>(kBuf_vision_scratch));
  cuda::vision_tower_forward(shape, tower_->weights, in, b, run_.cublas(), st);
  // The host vectors above are pageable: the copies have consumed them when cudaMemcpyAsync returns.
  return b.merged;
#else
  (void)s, (void)im;
  CHECK(false, "the vision tower of an engine without one");
  return nullptr;
#endif
}

}  // namespace rocket
