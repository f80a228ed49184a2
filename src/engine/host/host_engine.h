// The host-booster engine: the full qwen3_5_moe forward pass on the CPU, specialised at compile time
// to the chemistry in the generated engine.h. Owns the mapped weight blob and the runtime arena;
// allocates nothing after construction.
//
// Thread safety: one owner thread drives step(); kernels fan out internally with OpenMP.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <span>

#include "core/mapped_file.h"
#include "engine.h"  // generated: found through -I ENGINE_DIR
#include "boosters/memory_budget.h"
#include "fuel/coactivation.h"
#include "kernels/host/attention.h"
#include "plan/plan.h"
#include "telemetry/step_split.h"
#include "vision/prompt_images.h"
#include "vision/tower.h"

namespace rocket {

class HostEngine {
 public:
  static constexpr int kPadSlot = int(engine::kMaxStreams);  // sink for a bucket's inactive rows

  // Upright: loads ENGINE_DIR/plan.json, refuses on a chemistry or layout mismatch with this binary
  // or a residency over the machine's usable memory (less `reserve` bytes the operator keeps for other
  // work), maps weights.blob, allocates the arena.
  explicit HostEngine(const std::string& engine_dir, uint64_t reserve = 0);
  HostEngine(const HostEngine&) = delete;
  HostEngine& operator=(const HostEngine&) = delete;
  ~HostEngine();

  const Plan& plan() const { return plan_; }
  // The memory budget upright measured and admitted the plan's residency against.
  const MemoryBudget& budget() const { return budget_; }
  // The clock forward() reads between its kernel groups (telemetry/step_split.h); idle unless the
  // owner start()s it for a step it measures.
  StepClock& step_clock() { return clock_; }
  // The stored bytes of one weight part in the mapped blob (plan.tensor(name)); Error if absent.
  std::span<const uint8_t> tensor_bytes(const std::string& name) const;
  // Every forward pass from now on adds its routing (each row's top-k expert ids, every layer) to
  // `counts`; null stops. Every row counts, a padded bucket's padding rows too: a profiler runs
  // prefill and single-stream decode, which have none. REQUIRES: counts outlives its use.
  void count_routes(CoactivationProfile* counts) { routes_ = counts; }
  // Fuel: brings every page of the mapped weights into memory (the first step would otherwise fault
  // them in); returns the bytes read.
  uint64_t load_weights();

  // Prefill: n <= kPrefillChunk consecutive tokens of one stream at positions pos0.. pos0+n-1.
  // Logits are computed for rows >= first_logit_row (the last row only, for serving).
  void prefill(int slot, const int32_t* ids, int n, int64_t pos0, int first_logit_row);
  // A whole prompt from position 0 in the plan's chunks; returns the last position's logits.
  const float* prefill_prompt(int slot, const std::vector<int32_t>& ids);

  // Decode one token for each of n streams, run as the smallest compiled bucket >= n; rows beyond
  // n compute on the padding slot. Logits for every real row.
  void decode(int n, const int32_t* ids, const int* slots, const int64_t* pos);

  const float* logits(int row) const { return logits_ + int64_t(row) * engine::kVocab; }
  // A fresh sequence in `slot`: zeroes its conv and recurrent state (KV is overwritten as written) and
  // forgets its images.
  void reset_slot(int slot);

  // Images (docs/vision-tower.md, "In the host engine"): the prompt the stream in `slot` runs from now
  // on is `prompt`, whose image_pad runs are `images` in order. Runs the vision tower over them now;
  // from then on the slot's rows at the prompt's image tokens take the merged embeddings in place of
  // the token's, the prompt's rows the multimodal rotary positions (vision/mrope_positions.h), and
  // every row past the prompt the position index + rope delta. KV positions stay token indices.
  // Empty `images` forget the slot's. Call after reset_slot or restore_state (both forget them).
  // `computed`: the prompt's first tokens already in the slot's state (restored from the prefix
  // cache), which the slot never runs again: an image all of whose tokens lie before it is not
  // encoded (a resent image costs no tower), every other one is encoded whole and its rows from
  // `computed` on are read. Error, the slot's images forgotten, where the plan carries no vision
  // tower or the images do not match the prompt's image tokens.
  void set_images(int slot, std::span<const int32_t> prompt, const vision::PromptImages& images,
                  int64_t computed = 0);
  // The rope delta of the slot's sequence: 0 without images.
  int64_t rope_delta(int slot) const;
  int bucket_for(int n) const;

  // Paged KV. Every slot reads and writes its KV through a page table of cache pages
  // (cache/geometry.h: a cache page holds kKvPageTokens tokens of every full-attention layer, K and
  // V). At construction slot s owns pages [s·kPagesPerStream, (s+1)·kPagesPerStream), so a caller
  // without a prefix cache needs nothing more; the scheduler binds the pages its cache hands out.
  static constexpr int kPagesPerStream = int((engine::kMaxContext + engine::kKvPageTokens - 1) / engine::kKvPageTokens);
  // REQUIRES: pages.size() <= kPagesPerStream, every index a cache page.
  void bind_pages(int slot, const int* pages, int n);
  // Copy-on-extend: the first `tokens` rows of cache page src into dst, every layer, K and V.
  void copy_page(int src, int dst, int tokens);
  // Recurrent state (conv + GDN of every linear-attention layer) between a stream slot and a
  // snapshot slot of the plan's state_snapshots region (cache/snapshot_store.h layout), or between
  // two stream slots (a fork).
  void capture_state(int slot, int snapshot);
  void restore_state(int snapshot, int slot);
  void copy_state(int from_slot, int to_slot);  // the slot's images too

  // Speculative decoding with the fuel's MTP layer (a plan with draft_tokens; docs/speculative.md).
  // Every prefill and decode row also runs the MTP layer over its token and the model's hidden state at
  // the position before (zero at position 0 and where a stream resumed from a snapshot), so the MTP
  // layer's KV follows the stream. A step of one stream whose next token `token` (at `pos`) is picked
  // but not yet computed: draft() proposes k tokens greedily, verify() computes the k + 1 rows
  // [token, drafts...] (logits(j) for row j), the caller picks each row's token and counts the drafts
  // that match the picks before them, and accept() keeps the stream's state where those end.
  // REQUIRES: plan().draft_tokens > 0; 1 <= k <= draft_tokens; pos + k < max context.
  void draft(int slot, int32_t token, int64_t pos, int k, int32_t* drafts);
  void verify(int slot, const int32_t* ids, int k, int64_t pos);
  // After verify(): rows 0..accepted (accepted <= k) stand; the state, KV and MTP layer continue from
  // row `accepted`, whose pick is the stream's next token.
  void accept(int accepted);
  // After accept(): the state after verify row `row` (<= accepted) into snapshot `snapshot`.
  void capture_verified(int row, int snapshot);

 private:
  struct LayerRun;  // what a decoder layer's ops read (host_engine.cc)
  template <int B>
  void decode_bucket(int n, const int32_t* ids, const int* slots, const int64_t* pos);
  // The forward pass over n rows; row i is token ids[i] of stream slots[i] at position pos[i].
  // `independent` rows belong to distinct streams and may run in parallel.
  void forward(int n, const int32_t* ids, const int* slots, const int64_t* pos, bool independent,
               int first_logit_row);
  // The embedding rows of n tokens, row i at out + i * stride; Error for a token outside the vocabulary.
  void embed(int n, const int32_t* ids, float* out, int64_t stride) const;
  void decoder_layer(const LayerRun& r, int n, const int* slots, const int64_t* pos, bool independent);
  void gdn_layer(int l, int n, const int* slots, bool independent);
  void attention_layer(const LayerRun& r, int n, const int* slots, const int64_t* pos, bool independent);
  void moe_block(const LayerRun& r, int n, const int* slots);
  void routed(const LayerRun& r, int n);
  void routed_split(int l, int n, const int* slots);
  void expert(const LayerRun& r, const uint8_t* unit, int first, int m);
  // The MTP layer over n rows whose hidden inputs are in mtp_in (its second half of each row); leaves
  // each row's output (after the MTP norm) in hn and, with want_logits, the last row's logits.
  void mtp_forward(int n, const int32_t* ids, const int* slots, const int64_t* pos, bool independent, bool want_logits);
  // The MTP rows of n model rows just computed (`hidden`: their normed outputs). One stream's rows
  // (prefill) read the previous row's hidden state; independent rows (decode) each their stream's last.
  void mtp_follow(int n, const int32_t* ids, const int* slots, const int64_t* pos, bool one_stream, const float* hidden);
  // A stream's conv + recurrent state from snapshot-layout bytes.
  void restore_from(const uint8_t* src, int slot);
  // The rotary position of each of n rows (row i: slot slots[i] at KV position pos[i]) into rope_.
  void rope_positions(int n, const int* slots, const int64_t* pos);
  // Rows at a slot's image tokens take their merged image embeddings (x rows, stride kHidden).
  void image_embeddings(int n, const int32_t* ids, const int* slots, const int64_t* pos, float* x) const;
  float* mtp_hidden(int slot) const { return mtp_hidden_ + int64_t(slot) * engine::kHidden; }

  template <typename T = float>
  T* buf(uint64_t offset) const { return reinterpret_cast<T*>(runtime_ + (offset - engine::kBlobBytes)); }
  template <typename T = uint8_t>
  const T* weight(uint64_t offset) const { return reinterpret_cast<const T*>(blob_->data() + offset); }

  float* kv_page(int page, int full_layer, int kv) const;

  Plan plan_;
  MemoryBudget budget_;
  StepClock clock_;
  CoactivationProfile* routes_ = nullptr;
  std::unique_ptr<MappedFile> blob_;
  std::unique_ptr<int[]> page_table_;  // [slot][kPagesPerStream]
  uint8_t* runtime_ = nullptr;  // arena bytes [kBlobBytes, kArenaBytes)
  float* logits_ = nullptr;
  // Speculative decoding's buffers (compiler/memory_map.cc add_draft_buffers), null for a plan that
  // does not draft: each slot's hidden state for its next MTP row, the MTP rows' input, and verify()'s
  // rows: the model's normed hidden state and recurrent state (snapshot layout) after each.
  float* mtp_hidden_ = nullptr;
  float* mtp_in_ = nullptr;
  float* verify_hidden_ = nullptr;
  uint8_t* verify_states_ = nullptr;
  // Where gdn_layer copies each row's state: verify_states_ during verify(), else null.
  uint8_t* row_states_ = nullptr;
  // Each slot's images (set_images): the prompt's rotary positions, the merged embedding row of each
  // prompt index (-1: a text token), the merged embeddings, the rope delta. Empty for a text sequence.
  struct SlotImages {
    std::vector<host::MropePosition> positions;
    std::vector<int32_t> row;
    std::vector<float> merged;  // [image tokens][kHidden]
    int64_t delta = 0;
  };
  std::vector<SlotImages> images_;
  std::unique_ptr<vision::Tower> tower_;  // a plan that carries the tower
  // The rotary positions of the rows forward() or mtp_forward() runs (rope_positions).
  host::MropePosition rope_[engine::kMaxRows];
  struct Verified {  // the last verify(): its stream until accept(), then the rows it accepted
    int slot = -1, k = 0, accepted = -1;
    int64_t pos = 0;
    int32_t ids[kMaxDraftTokens + 1] = {};
  } verified_;
};

}  // namespace rocket
