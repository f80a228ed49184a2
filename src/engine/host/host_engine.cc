#include "engine/host/host_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "boosters/memory_budget.h"
#include "boosters/profile.h"
#include "cache/layout.h"
#include "core/error.h"
#include "engine/upright.h"
#include "kernels/host/activations.h"
#include "kernels/host/attention.h"
#include "kernels/host/conv1d.h"
#include "kernels/host/gdn.h"
#include "kernels/host/dense.h"
#include "kernels/host/moe.h"
#include "kernels/host/rms_norm.h"
#include "kernels/host/sample.h"
#include "kernels/host/weights.h"
#include "vision/mrope_positions.h"

namespace fs = std::filesystem;

namespace rocket {

using namespace engine;

namespace {

constexpr int64_t kSlots = kMaxStreams + 1;
// The text rotary's multimodal section (engine.h: the plan's, or the reference's default without a tower).
constexpr host::MropeSection kMropeSectionOf{kTextMropeSection[0], kTextMropeSection[1], kTextMropeSection[2]};
constexpr int64_t kGdnStateFloats = kLinVHeads * kLinKDim * kLinVDim;
constexpr int64_t kConvStateFloats = kConvDim * (kConvKernel - 1);
static_assert(kRotaryDim % 2 == 0 && kRotaryDim <= kHeadDim);
// The KV arena holds a full context for every slot, padding slot included; the scheduler's cache
// pool is exactly these pages (CacheGeometry::validate checks it against the plan).
constexpr int64_t kCachePages = kSlots * HostEngine::kPagesPerStream;
static_assert(kKvPageBytes >= kKvPageTokens * kKvHeads * kHeadDim * sizeof(float));
constexpr KvLayout kKv{.full_layers = kKvLayers, .page_bytes = kKvPageBytes};
constexpr SnapshotLayout kSnapshot{.recurrent_bytes = sizeof(float) * kLinearLayers * kGdnStateFloats,
                                   .conv_bytes = sizeof(float) * kLinearLayers * kConvStateFloats};
static_assert(kSnapshot.slot_bytes() == kSnapshotSlotBytes, "the compiler sized the snapshot slots for another state");
static_assert(kHeads % kKvHeads == 0 && kLinVHeads % kLinKHeads == 0);

// engine.h's kExpertUnit, for upright to compare with the plan's expert order.
std::vector<std::vector<int>> expert_unit_table() {
  std::vector<std::vector<int>> t(kLayers);
  for (int l = 0; l < kLayers; ++l) t[size_t(l)].assign(kExpertUnit[l], kExpertUnit[l] + kExperts);
  return t;
}

}  // namespace

HostEngine::HostEngine(const std::string& engine_dir, uint64_t reserve) {
  const fs::path dir(engine_dir);
  plan_ = Plan::load((dir / "plan.json").string());
  check_plan(plan_, EngineBuild{.fingerprint = kFingerprint,
                                .booster = kBooster,
                                .blob_bytes = kBlobBytes,
                                .arena_bytes = kArenaBytes,
                                .slots = int(kSlots),
                                .pages_per_stream = kPagesPerStream,
                                .kv_layers = int(kKvLayers),
                                .maps_expert_units = true,
                                .expert_units = expert_unit_table(),
                                .split_boosters = kSplitBoosters});
  const HardwareProfile machine = probe_host_memory();
  budget_ = MemoryBudget{.free = machine.memory_free, .reserve = machine.reserve + reserve, .floor = machine.floor};
  budget_.admit(kArenaBytes, "host memory");

  const std::string blob_path = (dir / "weights.blob").string();
  blob_ = std::make_unique<MappedFile>(blob_path);
  if (blob_->size() != kBlobBytes)
    fail("fuel: {} is {} bytes, the plan says {}", blob_path, blob_->size(), kBlobBytes);

  const uint64_t runtime_bytes = kArenaBytes - kBlobBytes;
  runtime_ = static_cast<uint8_t*>(std::aligned_alloc(kKvPageBytes, runtime_bytes));
  if (!runtime_) fail("upright: cannot allocate the {}-byte runtime arena", runtime_bytes);
  // Poison activations so a buffer read before it is written shows up as NaN, never as zeros.
  std::memset(runtime_, 0xff, runtime_bytes);
  logits_ = buf(kBuf_logits);
  page_table_ = std::make_unique<int[]>(kSlots * kPagesPerStream);
  for (int i = 0; i < kSlots * kPagesPerStream; ++i) page_table_[i] = i;
  if (kDraftTokens) {
    mtp_hidden_ = buf(plan_.buffer("mtp_hidden").offset);
    mtp_in_ = buf(plan_.buffer("mtp_in").offset);
    verify_hidden_ = buf(plan_.buffer("verify_hidden").offset);
    verify_states_ = buf<uint8_t>(plan_.buffer("verify_states").offset);
  }
  images_.resize(size_t(kSlots));
  if constexpr (kVisionTower) {
    CHECK(plan_.vision.has_value(), "engine.h carries a vision tower and the plan none");
    tower_ = std::make_unique<vision::Tower>(plan_.vision->tower, [this](const std::string& name) {
      return tensor_bytes(name).data();
    });
  }
  for (int s = 0; s < kSlots; ++s) reset_slot(s);
}

void HostEngine::set_images(int slot, std::span<const int32_t> prompt, const vision::PromptImages& images,
                            int64_t computed) {
  CHECK(slot >= 0 && slot < kMaxStreams);
  SlotImages& s = images_[size_t(slot)];
  s = SlotImages{};
  if (images.empty()) return;
  if constexpr (!kVisionTower) {
    fail("image input: this engine's plan carries no vision tower (build it from a fuel that holds one, for the "
         "host booster)");
  } else {
    if (int64_t(prompt.size()) > kMaxContext)
      fail("image input: a prompt of {} tokens exceeds the plan's context {}", prompt.size(), kMaxContext);
    // The plan's bound on one image, as the H200 engine holds it (its workspace is sized for it): the
    // processor's max_pixels in patches. The server's processor resizes every image within it.
    const VisionProcessorConfig& pc = plan_.vision->processor;
    const int64_t max_patches = int64_t(pc.max_pixels / uint64_t(pc.patch_size * pc.patch_size));
    for (const vision::ImageGrid& g : images.grids)
      if (g.patches() > max_patches)
        fail("image input: an image of {} patches exceeds the plan's bound of {} (its processor's max_pixels)", g.patches(),
             max_patches);
    vision::MropePositions m =
        vision::mrope_positions(prompt, int32_t(kImageToken), images.grids, int(kVisionMerge));
    // Each image's run of tokens, in order (mrope_positions refused a prompt whose image runs are not
    // the images' tokens, one run of at least one token an image); an image whose whole run lies before
    // `computed` is in the slot's state already (restored from the prefix cache) and is not encoded: its
    // rows are never read.
    std::vector<int64_t> pads;
    for (size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] == int32_t(kImageToken)) pads.push_back(int64_t(i));
    size_t skip = 0;
    int64_t skip_tokens = 0, skip_patches = 0;
    while (skip < images.grids.size()) {
      const int64_t n = images.grids[skip].patches() / (kVisionMerge * kVisionMerge);
      if (pads[size_t(skip_tokens + n - 1)] >= computed) break;
      skip_tokens += n;
      skip_patches += images.grids[skip++].patches();
    }
    const int64_t skip_values = skip_patches * plan_.vision->tower.patch_dim();
    if (skip_values > int64_t(images.patches.size()))
      fail("image input: {} patch values, fewer than the grids' patches", images.patches.size());
    const std::span<const vision::ImageGrid> encoded = std::span(images.grids).subspan(skip);
    vision::TowerOutput out;
    if (!encoded.empty())
      out = tower_->forward(std::span(images.patches).subspan(size_t(skip_values)), encoded);
    s.row.assign(prompt.size(), -1);
    for (size_t k = size_t(skip_tokens); k < pads.size(); ++k) s.row[size_t(pads[k])] = int32_t(k - size_t(skip_tokens));
    CHECK((int64_t(pads.size()) - skip_tokens) * kHidden == int64_t(out.merged.size()),
          "the tower's merged rows are the image tokens");
    s.positions = std::move(m.positions);
    s.merged = std::move(out.merged);
    s.delta = m.delta;
  }
}

int64_t HostEngine::rope_delta(int slot) const {
  CHECK(slot >= 0 && slot < kSlots);
  return images_[size_t(slot)].delta;
}

void HostEngine::rope_positions(int n, const int* slots, const int64_t* pos) {
  CHECK(n <= kMaxRows);
  for (int i = 0; i < n; ++i) {
    const SlotImages& s = images_[size_t(slots[i])];
    rope_[i] = pos[i] < int64_t(s.positions.size()) ? s.positions[size_t(pos[i])]
                                                     : host::MropePosition::text(pos[i] + s.delta);
  }
}

void HostEngine::image_embeddings(int n, const int32_t* ids, const int* slots, const int64_t* pos, float* x) const {
  for (int i = 0; i < n; ++i) {
    const SlotImages& s = images_[size_t(slots[i])];
    if (pos[i] >= int64_t(s.row.size()) || s.row[size_t(pos[i])] < 0) continue;
    // The row the prompt put an image token at must still hold one: another token here would be a
    // caller that ran a different prompt than it set images for.
    CHECK(ids[i] == int32_t(kImageToken), "a row at an image token's position holds another token");
    std::memcpy(x + int64_t(i) * kHidden, s.merged.data() + int64_t(s.row[size_t(pos[i])]) * kHidden,
                sizeof(float) * kHidden);
  }
}

float* HostEngine::kv_page(int page, int full_layer, int kv) const {
  return reinterpret_cast<float*>(buf<uint8_t>(kBuf_kv_cache) + kKv.offset(page, full_layer, kv));
}

void HostEngine::bind_pages(int slot, const int* pages, int n) {
  CHECK(slot >= 0 && slot < kSlots && n >= 0 && n <= kPagesPerStream);
  for (int i = 0; i < n; ++i) {
    CHECK(pages[i] >= 0 && pages[i] < kCachePages, "cache page out of range");
    page_table_[slot * kPagesPerStream + i] = pages[i];
  }
}

void HostEngine::copy_page(int src, int dst, int tokens) {
  CHECK(src >= 0 && src < kCachePages && dst >= 0 && dst < kCachePages && tokens >= 0 && tokens <= kKvPageTokens);
  for (int l = 0; l < kKvLayers; ++l)
    for (int kv = 0; kv < 2; ++kv)
      std::memcpy(kv_page(dst, l, kv), kv_page(src, l, kv), sizeof(float) * tokens * kKvHeads * kHeadDim);
}

void HostEngine::capture_state(int slot, int snapshot) {
  CHECK(slot >= 0 && slot < kSlots && snapshot >= 0 && snapshot < kStateSnapshots);
  uint8_t* dst = buf<uint8_t>(kBuf_state_snapshots) + snapshot * kSnapshot.slot_bytes();
  std::memcpy(dst, buf<uint8_t>(kBuf_gdn_state) + slot * kSnapshot.recurrent_bytes, kSnapshot.recurrent_bytes);
  std::memcpy(dst + kSnapshot.conv_offset(), buf<uint8_t>(kBuf_conv_state) + slot * kSnapshot.conv_bytes,
              kSnapshot.conv_bytes);
}

void HostEngine::restore_state(int snapshot, int slot) {
  CHECK(slot >= 0 && slot < kSlots && snapshot >= 0 && snapshot < kStateSnapshots);
  restore_from(buf<uint8_t>(kBuf_state_snapshots) + snapshot * kSnapshot.slot_bytes(), slot);
  // A snapshot keeps no hidden state: the stream's next MTP row reads zeros, as at position 0 (its
  // drafts may be worse for a token; the model's tokens are the same).
  if (kDraftTokens) std::fill_n(mtp_hidden(slot), kHidden, 0.0f);
  // Nor images: the sequence resumed here sets its own (set_images).
  images_[size_t(slot)] = SlotImages{};
}

void HostEngine::restore_from(const uint8_t* src, int slot) {
  std::memcpy(buf<uint8_t>(kBuf_gdn_state) + slot * kSnapshot.recurrent_bytes, src, kSnapshot.recurrent_bytes);
  std::memcpy(buf<uint8_t>(kBuf_conv_state) + slot * kSnapshot.conv_bytes, src + kSnapshot.conv_offset(),
              kSnapshot.conv_bytes);
}

void HostEngine::copy_state(int from_slot, int to_slot) {
  CHECK(from_slot >= 0 && from_slot < kSlots && to_slot >= 0 && to_slot < kSlots);
  uint8_t* g = buf<uint8_t>(kBuf_gdn_state);
  uint8_t* c = buf<uint8_t>(kBuf_conv_state);
  std::memcpy(g + to_slot * kSnapshot.recurrent_bytes, g + from_slot * kSnapshot.recurrent_bytes, kSnapshot.recurrent_bytes);
  std::memcpy(c + to_slot * kSnapshot.conv_bytes, c + from_slot * kSnapshot.conv_bytes, kSnapshot.conv_bytes);
  if (kDraftTokens) std::copy_n(mtp_hidden(from_slot), kHidden, mtp_hidden(to_slot));
  // A fork goes on with its parent's sequence: the same images, positions and rope delta.
  images_[size_t(to_slot)] = images_[size_t(from_slot)];
}

HostEngine::~HostEngine() { std::free(runtime_); }

std::span<const uint8_t> HostEngine::tensor_bytes(const std::string& name) const {
  const PlanTensor& t = plan_.tensor(name);
  return {blob_->data() + t.offset, size_t(t.bytes)};
}

uint64_t HostEngine::load_weights() {
  const uint8_t* p = blob_->data();
  const uint64_t n = blob_->size();
  // One read per 4 KiB page; the sum keeps the reads from being optimised away.
  uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < int64_t(n); i += 4096) sum += p[i];
  volatile uint64_t sink = sum;
  (void)sink;
  return n;
}

void HostEngine::reset_slot(int slot) {
  CHECK(slot >= 0 && slot < kSlots);
  std::memset(buf(kBuf_gdn_state) + slot * kLinearLayers * kGdnStateFloats, 0,
              sizeof(float) * kLinearLayers * kGdnStateFloats);
  std::memset(buf(kBuf_conv_state) + slot * kLinearLayers * kConvStateFloats, 0,
              sizeof(float) * kLinearLayers * kConvStateFloats);
  if (kDraftTokens) std::fill_n(mtp_hidden(slot), kHidden, 0.0f);
  if (!images_.empty()) images_[size_t(slot)] = SlotImages{};
}

int HostEngine::bucket_for(int n) const {
  for (int b : kBuckets)
    if (b >= n) return b;
  fail("decode: {} streams exceed the largest compiled bucket {}", n, kMaxStreams);
}

namespace {

host::WeightView view(const uint8_t* blob, const LinearAt& l, Precision p, int64_t rows, int64_t cols) {
  host::WeightView v{.precision = p, .rows = rows, .cols = cols, .data = blob + l.weight};
  if (p == Precision::kFP8Block) v.scale_inv = reinterpret_cast<const float*>(blob + l.scale);
  if (p == Precision::kNVFP4) {
    v.scale16 = blob + l.scale;
    std::memcpy(&v.scale2, blob + l.scale2, sizeof(float));
  }
  return v;
}

}  // namespace

// A decoder layer as its ops read it: the weights, the precisions they are stored in, the GDN state
// or KV layer it owns, and how its router's expert ids find their units.
struct HostEngine::LayerRun {
  const LayerAt& at;
  int kind_slot;  // index among the layers of its kind: GDN state slot, or KV layer
  int layer;      // the model layer (kIsFull, kExpertUnit, route counting); -1: the MTP layer
  Precision attn_proj, router, shared_expert, shared_expert_gate, experts;
  const ExpertAt& expert;
  uint64_t expert_stride;

  static LayerRun model(int l) {
    return {kLayer[l],           kKindSlot[l],           l,       kPrecisionAttnProj, kPrecisionRouter,
            kPrecisionSharedExpert, kPrecisionSharedExpertGate, kPrecisionExperts, kExpert, kExpertStride};
  }
  // The MTP layer: a full-attention layer whose KV follows the model's, every part BF16, experts in
  // id order.
  static LayerRun mtp() {
    constexpr Precision b = Precision::kBF16;
    return {kMtp.layer, int(kFullLayers), -1, b, b, b, b, b, kMtp.expert, kMtp.expert_stride};
  }
  bool full_attention() const { return layer < 0 || kIsFull[layer]; }
  int unit(int expert) const { return layer < 0 ? expert : kExpertUnit[layer][expert]; }
};

void HostEngine::prefill(int slot, const int32_t* ids, int n, int64_t pos0, int first_logit_row) {
  CHECK(n >= 1 && n <= kPrefillChunk && slot >= 0 && slot < kMaxStreams);
  if (pos0 + n > kMaxContext) fail("prefill: positions up to {} exceed the plan's context {}", pos0 + n, kMaxContext);
  int slots[kPrefillChunk];
  int64_t pos[kPrefillChunk];
  for (int i = 0; i < n; ++i) slots[i] = slot, pos[i] = pos0 + i;
  forward(n, ids, slots, pos, /*independent=*/false, first_logit_row);
  if (kDraftTokens) mtp_follow(n, ids, slots, pos, /*one_stream=*/true, buf(kBuf_hn));
}

const float* HostEngine::prefill_prompt(int slot, const std::vector<int32_t>& ids) {
  CHECK(!ids.empty());
  int last_row = 0;
  for (size_t at = 0; at < ids.size(); at += kPrefillChunk) {
    const int n = int(std::min<size_t>(kPrefillChunk, ids.size() - at));
    const bool last = at + n == ids.size();
    prefill(slot, ids.data() + at, n, int64_t(at), last ? n - 1 : n);
    last_row = n - 1;
  }
  return logits(last_row);
}

template <int B>
void HostEngine::decode_bucket(int n, const int32_t* ids, const int* slots, const int64_t* pos) {
  int32_t bids[B];
  int bslots[B];
  int64_t bpos[B];
  for (int i = 0; i < B; ++i) {
    const bool real = i < n;
    bids[i] = real ? ids[i] : ids[0];
    bslots[i] = real ? slots[i] : kPadSlot;
    bpos[i] = real ? pos[i] : 0;
  }
  forward(B, bids, bslots, bpos, /*independent=*/true, 0);
}

void HostEngine::decode(int n, const int32_t* ids, const int* slots, const int64_t* pos) {
  for (int i = 0; i < n; ++i) {
    CHECK(slots[i] >= 0 && slots[i] < kMaxStreams);
    if (pos[i] >= kMaxContext) fail("decode: position {} exceeds the plan's context {}", pos[i], kMaxContext);
  }
  // One instantiation per compiled bucket: the row count is a compile-time constant in each.
  [&]<size_t... I>(std::index_sequence<I...>) {
    const int b = bucket_for(n);
    ((kBuckets[I] == b ? (decode_bucket<kBuckets[I]>(n, ids, slots, pos), true) : false) || ...);
  }(std::make_index_sequence<std::size(kBuckets)>{});
  if (kDraftTokens) mtp_follow(n, ids, slots, pos, /*one_stream=*/false, buf(kBuf_hn));
}

void HostEngine::mtp_forward(int n, const int32_t* ids, const int* slots, const int64_t* pos, bool independent,
                             bool want_logits) {
  const uint8_t* blob = blob_->data();
  float* x = buf(kBuf_x);
  float* hn = buf(kBuf_hn);
  embed(n, ids, mtp_in_, 2 * kHidden);
  for (int i = 0; i < n; ++i) {
    float* row = mtp_in_ + int64_t(i) * 2 * kHidden;  // [normed embedding | normed hidden]
    host::rms_norm_zero_centred(row, weight<uint16_t>(kMtp.norm_embedding), kHidden, kNormEps, row);
    host::rms_norm_zero_centred(row + kHidden, weight<uint16_t>(kMtp.norm_hidden), kHidden, kNormEps, row + kHidden);
  }
  host::linear(view(blob, kMtp.fc, Precision::kBF16, kHidden, 2 * kHidden), mtp_in_, n, x);
  rope_positions(n, slots, pos);
  decoder_layer(LayerRun::mtp(), n, slots, pos, independent);
  for (int i = 0; i < n; ++i)
    host::rms_norm_zero_centred(x + i * kHidden, weight<uint16_t>(kMtp.final_norm), kHidden, kNormEps, hn + i * kHidden);
  if (want_logits)
    host::linear(view(blob, kLmHead, kPrecisionLmHead, kVocab, kHidden), hn + int64_t(n - 1) * kHidden, 1,
                 logits_ + int64_t(n - 1) * kVocab);
}

// The MTP row of token x at position p reads the model's normed hidden state at p - 1 and writes the
// MTP layer's KV at p (docs/speculative.md: one MTP row per model row, so a cache page carries the
// MTP layer's KV of exactly its own tokens).
void HostEngine::mtp_follow(int n, const int32_t* ids, const int* slots, const int64_t* pos, bool one_stream,
                            const float* hidden) {
  const size_t row_bytes = sizeof(float) * kHidden;
  for (int i = 0; i < n; ++i) {
    const float* h = one_stream && i > 0 ? hidden + int64_t(i - 1) * kHidden : mtp_hidden(slots[i]);
    std::memcpy(mtp_in_ + int64_t(i) * 2 * kHidden + kHidden, h, row_bytes);
  }
  // Each stream's next MTP row reads its last row's state (copied out before mtp_forward reuses hn).
  if (one_stream) std::memcpy(mtp_hidden(slots[0]), hidden + int64_t(n - 1) * kHidden, row_bytes);
  else
    for (int i = 0; i < n; ++i) std::memcpy(mtp_hidden(slots[i]), hidden + int64_t(i) * kHidden, row_bytes);
  mtp_forward(n, ids, slots, pos, /*independent=*/!one_stream, /*want_logits=*/false);
}

void HostEngine::draft(int slot, int32_t token, int64_t pos, int k, int32_t* drafts) {
  CHECK(kDraftTokens > 0, "draft: the plan does not draft");
  CHECK(slot >= 0 && slot < kMaxStreams && k >= 1 && k <= kDraftTokens && pos >= 1);
  if (pos + k >= kMaxContext) fail("draft: positions up to {} exceed the plan's context {}", pos + k, kMaxContext);
  // Row i is the MTP row of the token at pos + i: the picked token, then each draft in turn, each
  // reading the MTP layer's own output of the row before (the first, the model's state at pos - 1).
  std::memcpy(mtp_in_ + kHidden, mtp_hidden(slot), sizeof(float) * kHidden);
  int32_t t = token;
  for (int i = 0; i < k; ++i) {
    const int64_t p = pos + i;
    mtp_forward(1, &t, &slot, &p, /*independent=*/false, /*want_logits=*/true);
    t = drafts[i] = host::argmax(logits_, int(kVocab));
    std::memcpy(mtp_in_ + kHidden, buf(kBuf_hn), sizeof(float) * kHidden);
  }
}

void HostEngine::verify(int slot, const int32_t* ids, int k, int64_t pos) {
  CHECK(kDraftTokens > 0, "verify: the plan does not draft");
  CHECK(slot >= 0 && slot < kMaxStreams && k >= 1 && k <= kDraftTokens);
  if (pos + k >= kMaxContext) fail("verify: positions up to {} exceed the plan's context {}", pos + k, kMaxContext);
  Verified& v = verified_;
  v = {.slot = slot, .k = k, .pos = pos};
  std::copy_n(ids, k + 1, v.ids);
  int slots[kMaxDraftTokens + 1];
  int64_t positions[kMaxDraftTokens + 1];
  for (int i = 0; i <= k; ++i) slots[i] = slot, positions[i] = pos + i;
  row_states_ = verify_states_;
  forward(k + 1, ids, slots, positions, /*independent=*/false, /*first_logit_row=*/0);
  row_states_ = nullptr;
  std::memcpy(verify_hidden_, buf(kBuf_hn), sizeof(float) * (k + 1) * kHidden);
}

void HostEngine::accept(int accepted) {
  Verified& v = verified_;
  CHECK(v.slot >= 0, "accept: no verify() before it");
  CHECK(accepted >= 0 && accepted <= v.k, "accept: more rows than the verify step computed");
  // The state after the last accepted row; the KV of rows past it is written again before it is read.
  if (accepted < v.k) restore_from(verify_states_ + accepted * kSnapshot.slot_bytes(), v.slot);
  // The first row's MTP row ran in draft(); the accepted drafts' follow, each reading the model's
  // state at the row before.
  std::memcpy(mtp_hidden(v.slot), verify_hidden_, sizeof(float) * kHidden);
  if (accepted) {
    int slots[kMaxDraftTokens];
    int64_t positions[kMaxDraftTokens];
    for (int i = 0; i < accepted; ++i) slots[i] = v.slot, positions[i] = v.pos + 1 + i;
    mtp_follow(accepted, v.ids + 1, slots, positions, /*one_stream=*/true, verify_hidden_ + kHidden);
  }
  v.accepted = accepted;
  v.slot = -1;
}

void HostEngine::capture_verified(int row, int snapshot) {
  CHECK(row >= 0 && row <= verified_.accepted && snapshot >= 0 && snapshot < kStateSnapshots, "capture_verified arguments");
  std::memcpy(buf<uint8_t>(kBuf_state_snapshots) + snapshot * kSnapshot.slot_bytes(),
              verify_states_ + row * kSnapshot.slot_bytes(), kSnapshot.slot_bytes());
}

void HostEngine::embed(int n, const int32_t* ids, float* out, int64_t stride) const {
  const host::WeightView e = view(blob_->data(), kEmbed, kPrecisionEmbed, kVocab, kHidden);
  for (int i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= kVocab) fail("token id {} outside the vocabulary [0, {})", ids[i], kVocab);
    host::dequantize_row(e, ids[i], out + int64_t(i) * stride);
  }
}

void HostEngine::forward(int n, const int32_t* ids, const int* slots, const int64_t* pos, bool independent,
                         int first_logit_row) {
  const uint8_t* blob = blob_->data();
  float* x = buf(kBuf_x);
  float* hn = buf(kBuf_hn);
  embed(n, ids, x, kHidden);
  if constexpr (kVisionTower) image_embeddings(n, ids, slots, pos, x);
  rope_positions(n, slots, pos);
  for (int l = 0; l < kLayers; ++l) decoder_layer(LayerRun::model(l), n, slots, pos, independent);
  // A drafting engine's MTP rows read every row's normed hidden state.
  const int first_normed = kDraftTokens ? 0 : first_logit_row;
  for (int i = first_normed; i < n; ++i)
    host::rms_norm_zero_centred(x + i * kHidden, weight<uint16_t>(kFinalNorm), kHidden, kNormEps, hn + i * kHidden);
  clock_.lap(StepGroup::kNorm);
  if (first_logit_row >= n) return;
  const int rows = n - first_logit_row;
  host::linear(view(blob, kLmHead, kPrecisionLmHead, kVocab, kHidden), hn + int64_t(first_logit_row) * kHidden, rows,
               logits_ + int64_t(first_logit_row) * kVocab);
  clock_.lap(StepGroup::kLmHead);
}

// One decoder layer over the rows in x: pre-norm, token mixer (GDN or gated attention), residual,
// post-norm, MoE, residual.
void HostEngine::decoder_layer(const LayerRun& r, int n, const int* slots, const int64_t* pos, bool independent) {
  float* x = buf(kBuf_x);
  float* hn = buf(kBuf_hn);
  for (int i = 0; i < n; ++i)
    host::rms_norm_zero_centred(x + i * kHidden, weight<uint16_t>(r.at.input_norm), kHidden, kNormEps, hn + i * kHidden);
  clock_.lap(StepGroup::kNorm);
  if (r.full_attention()) attention_layer(r, n, slots, pos, independent);
  else gdn_layer(r.layer, n, slots, independent);
  const float* attn_out = buf(kBuf_attn_out);
  for (int64_t j = 0; j < int64_t(n) * kHidden; ++j) x[j] += attn_out[j];
  for (int i = 0; i < n; ++i)
    host::rms_norm_zero_centred(x + i * kHidden, weight<uint16_t>(r.at.post_norm), kHidden, kNormEps, hn + i * kHidden);
  clock_.lap(StepGroup::kNorm);
  moe_block(r, n, slots);
  clock_.lap(StepGroup::kMoe);
  const float* moe_out = buf(kBuf_moe_out);
  for (int64_t j = 0; j < int64_t(n) * kHidden; ++j) x[j] += moe_out[j];
}

void HostEngine::gdn_layer(int l, int n, const int* slots, bool independent) {
  const uint8_t* blob = blob_->data();
  const GdnAt& G = kLayer[l].gdn;
  const float* hn = buf(kBuf_hn);
  float* mix = buf(kBuf_mix);
  float* mixc = buf(kBuf_mixc);
  float* z = buf(kBuf_z);
  float* a = buf(kBuf_gdn_a);
  float* b = buf(kBuf_gdn_b);
  float* core = buf(kBuf_core);
  host::linear(view(blob, G.qkv, kPrecisionGdnProj, kConvDim, kHidden), hn, n, mix);
  host::linear(view(blob, G.z, kPrecisionGdnProj, kValueDim, kHidden), hn, n, z);
  host::linear(view(blob, G.b, kPrecisionGdnGate, kLinVHeads, kHidden), hn, n, b);
  host::linear(view(blob, G.a, kPrecisionGdnGate, kLinVHeads, kHidden), hn, n, a);
  clock_.lap(StepGroup::kDense);
  const int slot_of_layer = kKindSlot[l];
  const uint16_t* conv_w = weight<uint16_t>(G.conv);
  const uint16_t* norm_w = weight<uint16_t>(G.norm);
  float a_neg[kLinVHeads], dt_bias[kLinVHeads];
  for (int h = 0; h < kLinVHeads; ++h) {
    a_neg[h] = -std::exp(bf16_to_f32(weight<uint16_t>(G.a_log)[h]));
    dt_bias[h] = bf16_to_f32(weight<uint16_t>(G.dt_bias)[h]);
  }
  // Rows of one stream (prefill) must run in order: each step reads the state the previous wrote.
#pragma omp parallel for if (independent && n > 1) schedule(static, 1)
  for (int i = 0; i < n; ++i) {
    const int64_t s = slots[i];
    float* conv_state = buf(kBuf_conv_state) + (s * kLinearLayers + slot_of_layer) * kConvStateFloats;
    float* state = buf(kBuf_gdn_state) + (s * kLinearLayers + slot_of_layer) * kGdnStateFloats;
    float* qkv = mixc + int64_t(i) * kConvDim;
    host::conv1d_step(conv_state, mix + int64_t(i) * kConvDim, conv_w, kConvDim, kConvKernel, qkv);
    float g[kLinVHeads], beta[kLinVHeads];
    for (int h = 0; h < kLinVHeads; ++h) {
      beta[h] = host::sigmoid(b[i * kLinVHeads + h]);
      g[h] = a_neg[h] * host::softplus(a[i * kLinVHeads + h] + dt_bias[h]);
    }
    float* out = core + int64_t(i) * kValueDim;
    host::gdn_step(state, qkv, qkv + kKeyDim, qkv + 2 * kKeyDim, g, beta, kLinKHeads, kLinVHeads, kLinKDim, kLinVDim,
                   out);
    for (int h = 0; h < kLinVHeads; ++h)
      host::rms_norm_gated(out + h * kLinVDim, z + int64_t(i) * kValueDim + h * kLinVDim, norm_w, kLinVDim, kNormEps,
                           out + h * kLinVDim);
    if (row_states_) {  // verify(): this layer's state after row i, where accept() may want it
      uint8_t* row = row_states_ + i * kSnapshot.slot_bytes();
      std::memcpy(row + slot_of_layer * kGdnStateFloats * sizeof(float), state, sizeof(float) * kGdnStateFloats);
      std::memcpy(row + kSnapshot.conv_offset() + slot_of_layer * kConvStateFloats * sizeof(float), conv_state,
                  sizeof(float) * kConvStateFloats);
    }
  }
  clock_.lap(StepGroup::kGdn);
  host::linear(view(blob, G.out, kPrecisionGdnProj, kHidden, kValueDim), core, n, buf(kBuf_attn_out));
  clock_.lap(StepGroup::kDense);
}

void HostEngine::attention_layer(const LayerRun& r, int n, const int* slots, const int64_t* pos, bool independent) {
  const uint8_t* blob = blob_->data();
  const AttnAt& A = r.at.attn;
  const float* hn = buf(kBuf_hn);
  float* qg = buf(kBuf_mix);   // per head: query [hd] then gate [hd]
  float* kk = buf(kBuf_k);
  float* vv = buf(kBuf_v);
  float* core = buf(kBuf_core);
  constexpr int64_t kQ = kHeads * kHeadDim, kKV = kKvHeads * kHeadDim;
  host::linear(view(blob, A.q, r.attn_proj, 2 * kQ, kHidden), hn, n, qg);
  host::linear(view(blob, A.k, r.attn_proj, kKV, kHidden), hn, n, kk);
  host::linear(view(blob, A.v, r.attn_proj, kKV, kHidden), hn, n, vv);
  clock_.lap(StepGroup::kDense);
  const uint16_t* q_norm = weight<uint16_t>(A.q_norm);
  const uint16_t* k_norm = weight<uint16_t>(A.k_norm);
  const int64_t layer_slot = r.kind_slot;
#pragma omp parallel for if (independent && n > 1) schedule(static, 1)
  for (int i = 0; i < n; ++i) {
    float q[kQ];
    const float* row = qg + int64_t(i) * 2 * kQ;
    for (int h = 0; h < kHeads; ++h)
      host::rms_norm_zero_centred(row + h * 2 * kHeadDim, q_norm, kHeadDim, kNormEps, q + h * kHeadDim);
    float* k = kk + int64_t(i) * kKV;
    for (int h = 0; h < kKvHeads; ++h) host::rms_norm_zero_centred(k + h * kHeadDim, k_norm, kHeadDim, kNormEps, k + h * kHeadDim);
    // The rotary position: the token index for text, the multimodal one for a prompt with images
    // (rope_positions); the same bits as apply_rope at a text position.
    host::apply_mrope(q, kHeads, kHeadDim, kRotaryDim, rope_[i], kRopeTheta, kMropeSectionOf);
    host::apply_mrope(k, kKvHeads, kHeadDim, kRotaryDim, rope_[i], kRopeTheta, kMropeSectionOf);
    // KV through the slot's page table: position t is row t % page_tokens of page table[t / page_tokens].
    const int* table = page_table_.get() + int64_t(slots[i]) * kPagesPerStream;
    const int T = int(pos[i] + 1);
    const int n_pages = int((T + kKvPageTokens - 1) / kKvPageTokens);
    const float* k_pages[kPagesPerStream];
    const float* v_pages[kPagesPerStream];
    for (int j = 0; j < n_pages; ++j) {
      k_pages[j] = kv_page(table[j], int(layer_slot), 0);
      v_pages[j] = kv_page(table[j], int(layer_slot), 1);
    }
    const int64_t row_at = (pos[i] % kKvPageTokens) * kKV;
    std::memcpy(const_cast<float*>(k_pages[n_pages - 1]) + row_at, k, sizeof(float) * kKV);
    std::memcpy(const_cast<float*>(v_pages[n_pages - 1]) + row_at, vv + int64_t(i) * kKV, sizeof(float) * kKV);
    float* o = core + int64_t(i) * kQ;
    host::attention_decode_paged(q, k_pages, v_pages, int(kKvPageTokens), T, kHeads, kKvHeads, kHeadDim, o);
    for (int h = 0; h < kHeads; ++h)
      for (int d = 0; d < kHeadDim; ++d) o[h * kHeadDim + d] *= host::sigmoid(row[h * 2 * kHeadDim + kHeadDim + d]);
  }
  clock_.lap(StepGroup::kAttention);
  host::linear(view(blob, A.o, r.attn_proj, kHidden, kQ), core, n, buf(kBuf_attn_out));
  clock_.lap(StepGroup::kDense);
}

void HostEngine::moe_block(const LayerRun& r, int n, const int* slots) {
  const uint8_t* blob = blob_->data();
  const LayerAt& L = r.at;
  const float* hn = buf(kBuf_hn);
  float* router = buf(kBuf_router);
  int* idx = buf<int>(kBuf_route_idx);
  float* w = buf(kBuf_route_w);
  float* out = buf(kBuf_moe_out);
  host::linear(view(blob, L.router, r.router, kExperts, kHidden), hn, n, router);
  for (int i = 0; i < n; ++i) host::router_top_k(router + i * kExperts, kExperts, kTopK, idx + i * kTopK, w + i * kTopK);
  if (routes_ && r.layer >= 0) routes_->add(r.layer, idx, n, int(kTopK));

  // Shared expert, scaled by sigmoid(shared_expert_gate(x)).
  float* sg = buf(kBuf_shared_gate);
  float* su = buf(kBuf_shared_up);
  float* scale = buf(kBuf_shared_scale);
  host::linear(view(blob, L.shared_gate, r.shared_expert, kSharedInter, kHidden), hn, n, sg);
  host::linear(view(blob, L.shared_up, r.shared_expert, kSharedInter, kHidden), hn, n, su);
  host::swiglu(sg, su, n * kSharedInter, sg);
  host::linear(view(blob, L.shared_down, r.shared_expert, kHidden, kSharedInter), sg, n, out);
  host::linear(view(blob, L.shared_expert_gate, r.shared_expert_gate, 1, kHidden), hn, n, scale);
  for (int i = 0; i < n; ++i) {
    const float s = host::sigmoid(scale[i]);
    for (int j = 0; j < kHidden; ++j) out[i * kHidden + j] *= s;
  }

  // The MTP layer is never split: a split plan does not draft (compiler.cc check_drafting).
  if (kSplitBoosters > 1 && r.layer >= 0) routed_split(r.layer, n, slots);
  else routed(r, n);
}

void HostEngine::routed(const LayerRun& run, int n) {
  const uint8_t* blob = blob_->data();
  const LayerAt& L = run.at;
  const float* hn = buf(kBuf_hn);
  const int* idx = buf<int>(kBuf_route_idx);
  const float* w = buf(kBuf_route_w);
  float* out = buf(kBuf_moe_out);
  // Routed experts, grouped: each selected expert's weights are read once for all rows routed to it
  // (exactly the rows routed, no padding to a fixed per-expert count).
  int count[kExperts] = {}, start[kExperts + 1];
  for (int r = 0; r < n * kTopK; ++r) ++count[idx[r]];
  start[0] = 0;
  for (int e = 0; e < kExperts; ++e) start[e + 1] = start[e] + count[e];
  int order[kMaxRows * kTopK], fill[kExperts];
  for (int e = 0; e < kExperts; ++e) fill[e] = start[e];
  for (int r = 0; r < n * kTopK; ++r) order[fill[idx[r]]++] = r;
  float* in = buf(kBuf_moe_in);
  float* down = buf(kBuf_moe_down);
  for (int r = 0; r < n * kTopK; ++r) std::memcpy(in + int64_t(r) * kHidden, hn + int64_t(order[r] / kTopK) * kHidden, sizeof(float) * kHidden);
  for (int e = 0; e < kExperts; ++e)
    if (count[e]) expert(run, blob + L.experts + uint64_t(run.unit(e)) * run.expert_stride, start[e], count[e]);
  for (int r = 0; r < n * kTopK; ++r) {
    const int row = order[r] / kTopK;
    const float wt = w[order[r]];
    const float* d = down + int64_t(r) * kHidden;
    for (int j = 0; j < kHidden; ++j) out[row * kHidden + j] += wt * d[j];
  }
}

// One expert over the m dispatched rows at [first, first + m) of moe_in, into the same rows of moe_down.
// The router's expert id names the expert; the plan's expert order says which unit (here `unit`) holds it.
void HostEngine::expert(const LayerRun& r, const uint8_t* unit, int first, int m) {
  const float* x = buf(kBuf_moe_in) + int64_t(first) * kHidden;
  float* g = buf(kBuf_moe_gate) + int64_t(first) * kMoeInter;
  float* u = buf(kBuf_moe_up) + int64_t(first) * kMoeInter;
  host::linear(view(unit, r.expert.gate, r.experts, kMoeInter, kHidden), x, m, g);
  host::linear(view(unit, r.expert.up, r.experts, kMoeInter, kHidden), x, m, u);
  host::swiglu(g, u, m * kMoeInter, g);
  host::linear(view(unit, r.expert.down, r.experts, kHidden, kMoeInter), g, m, buf(kBuf_moe_down) + int64_t(first) * kHidden);
}

// The split arrangement on host boosters. Booster b holds units [b * kBoosterUnits, (b + 1) *
// kBoosterUnits) of every layer and owns the rows of the streams in slots s with s % kSplitBoosters ==
// b (their attention and recurrent state live there). Dispatch: each routed row goes to the booster
// holding its expert, into that booster's range of the exchange buffer (moe_in), exactly the rows
// routed; each booster runs its own experts over what it received; combine: each result row goes back
// to its owner (into moe_in again, by routed slot), which adds its rows' top-k results in expert-id
// order, the order the one-booster engine adds them in, so the split engine's tokens are the
// one-booster engine's bit for bit. The host's boosters are its cores taking turns: the exchange is a
// copy between their ranges, measured (all_to_all) and counted per link as a GPU fabric would carry it.
void HostEngine::routed_split(int l, int n, const int* slots) {
  static_assert(kSplitBoosters <= kMaxSplitBoosters && kExperts % kSplitBoosters == 0);
  const uint8_t* blob = blob_->data();
  const LayerAt& L = kLayer[l];
  const float* hn = buf(kBuf_hn);
  const int* idx = buf<int>(kBuf_route_idx);
  const float* w = buf(kBuf_route_w);
  float* out = buf(kBuf_moe_out);
  float* exchange = buf(kBuf_moe_in);
  const float* down = buf(kBuf_moe_down);
  const int routed = n * kTopK;
  auto owner = [&](int r) { return slots[r / kTopK] % kSplitBoosters; };
  // Units are grouped by booster, so ordering routed slots by unit groups them by destination booster
  // and, within it, by expert; ties keep slot order.
  int count[kExperts] = {}, start[kExperts + 1];
  for (int r = 0; r < routed; ++r) ++count[kExpertUnit[l][idx[r]]];
  start[0] = 0;
  for (int u = 0; u < kExperts; ++u) start[u + 1] = start[u] + count[u];
  int order[kMaxRows * kTopK], position[kMaxRows * kTopK], fill[kExperts];
  for (int u = 0; u < kExperts; ++u) fill[u] = start[u];
  for (int r = 0; r < routed; ++r) {
    position[r] = fill[kExpertUnit[l][idx[r]]]++;
    order[position[r]] = r;
  }
  clock_.lap(StepGroup::kMoe);

  const uint64_t row_bytes = sizeof(float) * kHidden;
  for (int p = 0; p < routed; ++p) {
    const int r = order[p];
    std::memcpy(exchange + int64_t(p) * kHidden, hn + int64_t(r / kTopK) * kHidden, row_bytes);
    const int to = kExpertUnit[l][idx[r]] / kBoosterUnits;
    if (owner(r) != to) clock_.exchanged(kSplitBoosters, owner(r), to, row_bytes);
  }
  clock_.lap(StepGroup::kAllToAll);

  for (int b = 0; b < kSplitBoosters; ++b)
    for (int u = b * kBoosterUnits; u < (b + 1) * kBoosterUnits; ++u)
      if (count[u]) expert(LayerRun::model(l), blob + L.experts + uint64_t(u) * kExpertStride, start[u], count[u]);
  clock_.lap(StepGroup::kMoe);

  for (int r = 0; r < routed; ++r) {
    std::memcpy(exchange + int64_t(r) * kHidden, down + int64_t(position[r]) * kHidden, row_bytes);
    const int from = kExpertUnit[l][idx[r]] / kBoosterUnits;
    if (from != owner(r)) clock_.exchanged(kSplitBoosters, from, owner(r), row_bytes);
  }
  clock_.lap(StepGroup::kAllToAll);

  for (int row = 0; row < n; ++row) {
    int k_order[kTopK];
    for (int k = 0; k < kTopK; ++k) k_order[k] = k;
    const int* e = idx + row * kTopK;
    std::sort(k_order, k_order + kTopK, [&](int a, int b) { return e[a] < e[b]; });
    for (int k : k_order) {
      const int r = row * kTopK + k;
      const float wt = w[r];
      const float* d = exchange + int64_t(r) * kHidden;
      for (int j = 0; j < kHidden; ++j) out[row * kHidden + j] += wt * d[j];
    }
  }
}

}  // namespace rocket
