// Image input on the H200 (docs/vision-tower.md, "In the H200 engine"): each slot's prompt images
// (BatchEngine::set_images) and what a prefill call stages from them. A prompt's rows carry two
// things the text path does not have:
//  - a rotary position apart from the KV index (the text model's multimodal rotary: an image token's
//    time, height and width; every text token after an image at its index + the rope delta), staged
//    for every row of every call (decode rows too) as cuda::RopePosition beside the KV index;
//  - for an image token, the vision tower's merged row in place of the token's embedding: the call's
//    staging runs the tower over each image its rows reach (kernels/cuda/vision_tower.cuh, on the
//    plan's vision_inputs and vision_scratch), rounds the rows it reaches to bf16 into the plan's
//    image_rows at the call's row index k, and stages the row's id as -1 - k (embedding.cuh).
// The host keeps a slot's patches; the device holds no memory per slot. image_rows is two parts: a
// call's staging rows (the prefill chunk's, at the call's row index) and the encoder cache after them:
// an image whose digest is known (PromptImages::digests, the client's bytes) is encoded once into the
// cache and its rows read from there by every call that reaches it while it stays (least recently
// used goes first; never one a call in flight reads, nor one a slot's images pin: an image set while
// its entry is there pins it and keeps no patches), so an agent resending a screenshot whose prompt
// the prefix cache holds up to a page inside the image neither runs the tower nor copies its patches. An image
// without a digest, or one the cache cannot take, is encoded by each call whose rows reach it into
// the staging rows (the plan bounds an image's tokens by the prefill chunk: at most two encodes).
//
// Thread safety: the engine's; one owner thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine.h"  // generated: found through -I ENGINE_DIR
#include "engine/h200/h200_runner.h"
#include "kernels/cuda/rope.cuh"
#include "vision/prompt_images.h"

namespace rocket {

class H200Images {
 public:
  // REQUIRES: the runner outlives this; weights resident before the first call that encodes.
  explicit H200Images(H200Runner& run);
  ~H200Images();

  // BatchEngine::set_images for `slot`: the prompt's rotary positions and rope delta, and the images'
  // patches kept for the calls that reach them. Error (the slot left text) where the plan carries no
  // tower, the images do not match the prompt's image tokens (vision::mrope_positions), or an image has
  // more patches than the plan's bound.
  void set(int slot, std::span<const int32_t> prompt, const vision::PromptImages& images, int64_t computed);
  // A text sequence in `slot` from now on (reset, restore: BatchEngine::set_images follows).
  void forget(int slot);
  void copy(int from_slot, int to_slot);
  int64_t rope_delta(int slot) const;

  // The rotary position of the token at KV index `pos` of the sequence in `slot`.
  cuda::RopePosition rope_at(int slot, int64_t pos) const;
  // A new call: the encoder cache's entries its stage() calls read are kept until the next one.
  void begin_call() { ++call_; }
  // The rows [pos0, pos0 + n) of `slot`, staged at rows row0.. of a call: rope[r] their rotary
  // positions, and each image token's ids[r] replaced by -1 - (row0 + r), its merged row encoded into
  // image_rows there (enqueued on the runner's stream). REQUIRES: row0 + n <= the plan's prefill chunk.
  void stage(int slot, int64_t pos0, int n, int row0, int32_t* ids, cuda::RopePosition* rope);

 private:
  struct Image {
    int64_t first = 0, tokens = 0;  // the prompt's run of its image_pad tokens
    int64_t patch0 = 0;             // its first patch in Slot::patches
    vision::ImageGrid grid;
    bool keyed = false;             // digest known: the encoder cache may hold its rows
    bool pinned = false;            // in the encoder cache when set: its entry is kept, its patches are not
    ImageDigest digest;
  };
  // An image's merged rows in the encoder cache: image_rows rows [kPrefillChunk + row0, + tokens).
  struct Cached {
    ImageDigest digest;
    int64_t row0 = 0, tokens = 0;
    uint64_t used = 0;  // the last call that read it
    int pins = 0;       // slots whose images rely on it (never evicted while pinned)
  };
  struct Slot {
    std::vector<cuda::RopePosition> positions;  // the prompt's, one per token; empty: text
    int64_t delta = 0;
    std::vector<Image> images;  // those not wholly before the resume point (the only ones a row reads)
    std::vector<float> patches;
  };

  // The tower over one image into the plan's vision_scratch; returns its merged rows (fp32,
  // [tokens][hidden]) there.
  const float* encode(const Slot& s, const Image& im);
  // The cache's entry for `im`, encoded now where it is not there yet; nullptr where the image has no
  // digest or the cache has no room that no call in flight reads and no slot pins.
  const Cached* cached(const Slot& s, const Image& im);
  Cached* find_cached(const ImageDigest& digest, int64_t tokens);
  // Each pinned image of `s` pins (+1) or releases (-1) its entry.
  void pin(const Slot& s, int delta);

  struct Tower;  // the tower's shape and weights in the arena, found on the first encode

  H200Runner& run_;
  std::vector<Slot> slots_;
  std::unique_ptr<Tower> tower_;
  std::vector<Cached> cache_;
  uint64_t call_ = 1;
};

}  // namespace rocket
