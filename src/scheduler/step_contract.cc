#include "scheduler/step_contract.h"

#include <algorithm>

#include <fmt/format.h>

#include "scheduler/batch_engine.h"

namespace rocket {

namespace {

// The call as the message shows it: each segment's slot, rows, first position and capture.
std::string shape(std::span<const PrefillSegment> segments, int decode_rows) {
  std::string s = fmt::format("{} segments, {} decode rows:", segments.size(), decode_rows);
  for (size_t i = 0; i < segments.size() && i < 40; ++i) {
    const PrefillSegment& g = segments[i];
    s += fmt::format(" [slot {} n {} pos {}", g.slot, g.n, g.pos0);
    if (g.capture) s += fmt::format(" capture {}@{}", g.capture->snapshot, g.capture->tokens);
    s += "]";
  }
  if (segments.size() > 40) s += " ...";
  return s;
}

}  // namespace

StepContract::StepContract(const Plan& plan)
    : buckets_(plan.buckets), max_streams_(plan.max_streams), prefill_chunk_(plan.prefill_chunk),
      max_context_(plan.max_context), snapshots_(plan.state_snapshots),
      vocab_(int(plan.chemistry.vocab)), draft_tokens_(plan.draft_tokens) {
  std::sort(buckets_.begin(), buckets_.end());
  if (buckets_.empty() || buckets_.front() != 1)
    fail("plan: the decode buckets must start at 1 (a lone decoding stream is a bucket)");
  if (buckets_.back() != max_streams_)
    fail("plan: the largest bucket {} is not max_streams {}", buckets_.back(), max_streams_);
  if (prefill_chunk_ < 1 || max_context_ < 1) fail("plan: prefill_chunk {} and max_context {} must be positive", prefill_chunk_, max_context_);
  if (plan.kv_page_tokens % kCaptureQuantum != 0)
    fail("plan: {} tokens per KV page is not a multiple of {}: the prefix cache captures at page boundaries, "
         "which the token path can only do at multiples of its GDN chunk",
         plan.kv_page_tokens, kCaptureQuantum);
}

int StepContract::bucket_for(int n) const {
  for (int b : buckets_)
    if (b >= n) return b;
  throw StepRefused(fmt::format("step contract: {} rows exceed the largest compiled bucket {}", n, buckets_.back()));
}

MixedRoom StepContract::mixed_room(int d) const {
  if (d < 1 || d >= max_streams_) return {};
  const int b = bucket_for(d);
  const MixedRoom room{.segments = std::min(max_streams_ - d, segment_entries() - b), .rows = prefill_chunk_ - b};
  if (room.segments < 1 || room.rows < 1) return {};
  return room;
}

CallLayout StepContract::layout(std::span<const PrefillSegment> segments, int d) const {
  CallLayout L;
  L.bucket = d ? bucket_for(d) : 0;
  const auto add = [&](int segment, int n) {
    L.entries.push_back({.segment = segment, .row0 = L.rows, .n = n});
    L.rows += n;
  };
  for (int i = 0; i < d; ++i) add(i, 1);
  for (int r = d; r < L.bucket; ++r) add(-1, 1);
  for (int i = d; i < int(segments.size()); ++i) add(i, segments[size_t(i)].n);
  return L;
}

CallLayout StepContract::check_prefill_batch(std::span<const PrefillSegment> segments, int d) const {
  const auto refuse = [&](const std::string& why) {
    throw StepRefused(fmt::format("step contract: {} ({})", why, shape(segments, d)));
  };
  const int S = int(segments.size());
  if (S < 1 || S > max_streams_) refuse(fmt::format("a prefill call has 1..{} segments", max_streams_));
  if (d < 0 || d > S) refuse("decode rows are some of the segments");
  std::vector<bool> seen(size_t(max_streams_), false);
  for (int i = 0; i < S; ++i) {
    const PrefillSegment& g = segments[size_t(i)];
    if (g.slot < 0 || g.slot >= max_streams_) refuse(fmt::format("segment {}: slot outside [0, {})", i, max_streams_));
    if (seen[size_t(g.slot)]) refuse(fmt::format("segment {}: a second segment of slot {}", i, g.slot));
    seen[size_t(g.slot)] = true;
    if (g.n < 1 || g.n > prefill_chunk_ || !g.ids) refuse(fmt::format("segment {}: 1..{} rows", i, prefill_chunk_));
    for (int r = 0; r < g.n; ++r)
      if (g.ids[r] < 0 || g.ids[r] >= vocab_)
        refuse(fmt::format("segment {}: token id {} outside the vocabulary [0, {})", i, g.ids[r], vocab_));
    if (i < d && (g.n != 1 || g.capture)) refuse(fmt::format("segment {}: a decode row is one row without a capture", i));
    if (g.pos0 < 0 || g.pos0 + g.n > max_context_)
      refuse(fmt::format("segment {}: positions {}..{} outside the plan's context {}", i, g.pos0, g.pos0 + g.n, max_context_));
    if (const PrefillCapture* c = g.capture) {
      if (c->tokens <= 0 || c->tokens >= g.n || c->snapshot < 0 || c->snapshot >= snapshots_)
        refuse(fmt::format("segment {}: a capture inside the segment into one of the plan's {} snapshots", i, snapshots_));
      if ((g.pos0 + c->tokens) % kCaptureQuantum != 0)
        refuse(fmt::format("segment {}: a capture at position {} is not a multiple of {}", i, g.pos0 + c->tokens,
                           kCaptureQuantum));
    }
  }
  const CallLayout L = layout(segments, d);
  if (int(L.entries.size()) > segment_entries())
    refuse(fmt::format("{} segments and {} padding rows exceed the {} segment entries", S, L.bucket - d, segment_entries()));
  if (L.rows > prefill_chunk_)
    refuse(fmt::format("{} rows (padding included) exceed the plan's prefill chunk {}", L.rows, prefill_chunk_));
  return L;
}

void StepContract::check_decode(int n, const int32_t* ids, const int* slots, const int64_t* pos) const {
  const auto refuse = [&](const std::string& why) { throw StepRefused(fmt::format("step contract: decode of {} rows: {}", n, why)); };
  if (n < 1 || n > max_bucket()) refuse(fmt::format("a decode call has 1..{} rows", max_bucket()));
  std::vector<bool> seen(size_t(max_streams_), false);
  for (int i = 0; i < n; ++i) {
    if (slots[i] < 0 || slots[i] >= max_streams_) refuse(fmt::format("row {}: slot {} outside [0, {})", i, slots[i], max_streams_));
    if (seen[size_t(slots[i])]) refuse(fmt::format("row {}: a second row of slot {}", i, slots[i]));
    seen[size_t(slots[i])] = true;
    if (pos[i] < 0 || pos[i] >= max_context_)
      refuse(fmt::format("row {}: position {} outside the plan's context {}", i, pos[i], max_context_));
    if (ids[i] < 0 || ids[i] >= vocab_) refuse(fmt::format("row {}: token id {} outside the vocabulary [0, {})", i, ids[i], vocab_));
  }
}

void StepContract::check_speculative(const char* call, int slot, const int32_t* ids, int n_ids, int k, int64_t pos) const {
  const auto refuse = [&](const std::string& why) {
    throw StepRefused(fmt::format("step contract: {} of {} tokens at position {}: {}", call, k, pos, why));
  };
  if (!draft_tokens_) refuse("the plan does not draft");
  if (k < 1 || k > draft_tokens_) refuse(fmt::format("a draft is 1..{} tokens", draft_tokens_));
  if (slot < 0 || slot >= max_streams_) refuse(fmt::format("slot {} outside [0, {})", slot, max_streams_));
  if (pos < 1 || pos + k >= max_context_)
    refuse(fmt::format("its rows {}..{} must lie in [1, {})", pos, pos + k, max_context_));
  for (int i = 0; i < n_ids; ++i)
    if (ids[i] < 0 || ids[i] >= vocab_) refuse(fmt::format("row {}: token id {} outside the vocabulary [0, {})", i, ids[i], vocab_));
}

}  // namespace rocket
