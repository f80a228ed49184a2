#include "engine/h200/h200_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "engine/h200/forward_shapes.h"
#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/host/sample.h"

namespace rocket {

using namespace engine;
using namespace h200;

H200Engine::H200Engine(const std::string& engine_dir, uint64_t reserve_bytes)
    : runner_(engine_dir, reserve_bytes), forward_(runner_), images_(runner_) {}

const LoadReport& H200Engine::fuel(const LoadOptions& load) {
  const LoadReport& report = runner_.fuel(load);
  forward_.fuelled();
  return report;
}

int H200Engine::bucket_for(int n) const { return bucket_at_least(n); }

// ---------------------------------------------------------------------------------------------------
// Steps

void H200Engine::prefill(int slot, const int32_t* ids, int n, int64_t pos0, int first_logit_row,
                         const SamplingKnobs* knobs, const PrefillCapture* capture) {
  CHECK(n >= 1 && n <= kPrefillChunk && slot >= 0 && slot < kMaxStreams && first_logit_row >= 0 && first_logit_row <= n);
  if (pos0 + n > kMaxContext)
    throw Error("prefill: positions up to " + std::to_string(pos0 + n) + " exceed the plan's context " + std::to_string(kMaxContext));
  for (int i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= kVocab)
      throw Error("token id " + std::to_string(ids[i]) + " outside the vocabulary [0, " + std::to_string(kVocab) + ")");
  CHECK(!capture || (capture->tokens > 0 && capture->tokens < n && capture->snapshot >= 0 && capture->snapshot < kStateSnapshots),
        "prefill: capture outside the call");
  // The call's rows as the kernels take them: rotary positions, and image tokens' ids pointing at
  // the tower's rows (H200Images::stage).
  std::vector<int32_t> staged(ids, ids + n);
  std::vector<cuda::RopePosition> rope(static_cast<size_t>(n));
  images_.begin_call();
  images_.stage(slot, pos0, n, 0, staged.data(), rope.data());
  ids = staged.data();
  float* const logits_to = runner_.logits_to(first_logit_row, n - first_logit_row);
  // Where row r (>= first_logit_row) of the call lands on the host.
  auto row_at = [&](int r) { return logits_to + int64_t(r - first_logit_row) * kVocab; };
  // Rows [at, at + len): the token path from kTokenPieceMin rows, else pieces of the bucket sizes.
  auto run = [&](int at, int len, const PrefillCapture* inside) {
    const bool pick = knobs && at + len == n;
    if (len >= kTokenPieceMin) {
      const PieceSegment seg{.slot = slot, .row0 = 0, .n = len, .pos0 = pos0 + at, .capture = inside};
      forward_.prefill_piece({&seg, 1}, ids + at, rope.data() + at, kKindAll);
      const int first = std::max(first_logit_row - at, 0);
      forward_.piece_lm_head(len, first, row_at(at + first), pick ? knobs : nullptr);
      return;
    }
    CHECK(!inside, "a capture inside bucket-sized pieces is split off by the caller");
    for (int end = at + len; at < end;) {
      const int piece = bucket_at_most(end - at);
      H200Runner::StepInputs& s = runner_.staging();
      std::copy(ids + at, ids + at + piece, s.ids);
      std::copy(rope.begin() + at, rope.begin() + at + piece, s.rope);
      s.slots[0] = slot;
      s.pos[0] = int32_t(pos0 + at);
      const bool last = pick && at + piece == end;
      if (last) s.sample[0] = runner_.staged_knobs(knobs, 0);  // staged with the piece's inputs: pick_tokens' staging, folded in
      runner_.upload_step();
      const bool want = at + piece > first_logit_row;
      forward_.enqueue_prefill(piece, slot, want || last);
      if (last) forward_.enqueue_decode(1, kKindSampling, piece - 1);
      if (want) {
        const int r0 = std::max(first_logit_row - at, 0);
        CUDA_CHECK(cudaMemcpyAsync(row_at(at + r0), runner_.buf<float>(kBuf_logits) + int64_t(r0) * kVocab,
                                   sizeof(float) * (piece - r0) * kVocab, cudaMemcpyDeviceToHost, runner_.stream()));
      }
      at += piece;
    }
  };
  if (!capture) {
    run(0, n, nullptr);
  } else if (n >= kTokenPieceMin && (pos0 + capture->tokens) % tiling::kGdnChunk == 0) {
    // The token path takes the snapshot inside its layers (qwen3_5_moe_piece.cu).
    run(0, n, capture);
  } else {
    run(0, capture->tokens, nullptr);
    runner_.capture_state(slot, capture->snapshot);
    run(capture->tokens, n - capture->tokens, nullptr);
  }
  runner_.masks_used();
  CUDA_CHECK(cudaStreamSynchronize(runner_.stream()));
}

void H200Engine::prefill_batch(std::span<const PrefillSegment> segments, int decode) {
  // The piece is the contract's layout of the call (decode rows, the decode bucket's padding rows on
  // kPadSlot, the prompt pieces), checked: the rows and entries it runs are the ones the scheduler's
  // bounds counted (the layout once appended a second round of padding after the prompts; issue 38).
  const CallLayout L = runner_.contract().check_prefill_batch(segments, decode);
  std::vector<PieceSegment> pieces;
  std::vector<int32_t> ids;
  std::vector<cuda::RopePosition> rope;
  ids.reserve(size_t(L.rows));
  rope.reserve(size_t(L.rows));
  images_.begin_call();
  for (const CallLayout::Entry& e : L.entries) {
    if (e.segment < 0) {
      pieces.push_back({.slot = kPadSlot, .row0 = e.row0, .n = 1, .pos0 = 0, .capture = nullptr});
      ids.push_back(segments[0].ids[0]);
      rope.push_back(cuda::RopePosition::text(0));
      continue;
    }
    const PrefillSegment& g = segments[size_t(e.segment)];
    pieces.push_back({.slot = g.slot, .row0 = e.row0, .n = g.n, .pos0 = g.pos0, .capture = g.capture});
    ids.insert(ids.end(), g.ids, g.ids + g.n);
    rope.resize(ids.size());
    images_.stage(g.slot, g.pos0, g.n, e.row0, ids.data() + e.row0, rope.data() + e.row0);
  }
  forward_.prefill_piece(pieces, ids.data(), rope.data(), kKindAll, L.bucket);
  // The picks and logits are the segments' own, in segment order: the padding rows are left out.
  std::vector<PieceSegment> real;
  for (size_t i = 0; i < L.entries.size(); ++i)
    if (L.entries[i].segment >= 0) real.push_back(pieces[i]);
  forward_.segments_lm_head(real, segments);
  runner_.masks_used();
  CUDA_CHECK(cudaStreamSynchronize(runner_.stream()));
}

void H200Engine::bench_piece(int slot, const int32_t* ids, int n, int64_t pos0, uint32_t kinds) {
  CHECK(n >= kTokenPieceMin && n <= kPrefillChunk && slot >= 0 && slot < kSlots && pos0 + n <= kMaxContext);
  const PieceSegment seg{.slot = slot, .row0 = 0, .n = n, .pos0 = pos0, .capture = nullptr};
  forward_.prefill_piece({&seg, 1}, ids, nullptr, kinds);
  CUDA_CHECK(cudaStreamSynchronize(runner_.stream()));
}

void H200Engine::decode(int n, const int32_t* ids, const int* slots, const int64_t* pos, const SamplingKnobs* knobs,
                        bool timed) {
  // The plan's limits on a decode call (rows, distinct slots, positions, token ids) have one source,
  // the contract the host engine and the scheduler check too.
  runner_.contract().check_decode(n, ids, slots, pos);
  const int b = bucket_for(n);
  H200Runner::StepInputs& s = runner_.staging();
  for (int i = 0; i < b; ++i) {
    const bool real = i < n;
    s.ids[i] = real ? ids[i] : ids[0];
    s.slots[i] = real ? slots[i] : kPadSlot;
    s.pos[i] = real ? int32_t(pos[i]) : 0;
    s.rope[i] = real ? images_.rope_at(slots[i], pos[i]) : cuda::RopePosition::text(0);
    s.sample[i] = real ? runner_.staged_knobs(knobs ? knobs + i : nullptr, i) : SamplingKnobs{.temperature = 0.0f};
  }
  // The graph's embedding reads the staging itself (Qwen35MoeForward::enqueue_decode). A timed step
  // runs the same kernels with events between their groups.
  const auto step = [&] { forward_.enqueue_decode(b, kKindAll); };
  if (timed) runner_.launch_timed(b, Qwen35MoeForward::kStepMarks, step);
  else runner_.launch(b, kKindAll, step);
  runner_.staged_read_enqueued();
  step_rows_ = b;
  runner_.masks_used();
}

void H200Engine::download_logits(int n) {
  CHECK(n >= 1 && n <= step_rows_);
  runner_.download_logits(n);
}

cudaGraphExec_t H200Engine::graph(int b, uint32_t kinds) {
  return runner_.graph(b, kinds, [&] { forward_.enqueue_decode(b, kinds); });
}

// Static fire: every bucket runs once directly (the first launch of each kernel instantiation sets its
// shared-memory limit, which a capture must not do), then its graph is captured; all rows sit on the
// padding slot, which is reset afterwards. Then the plan's golden token, when the build had goldens.
std::string H200Engine::static_fire() {
  const auto t0 = std::chrono::steady_clock::now();
  for (int b : kBuckets) {
    H200Runner::StepInputs& s = runner_.staging();
    for (int i = 0; i < b; ++i) {
      s.ids[i] = int32_t((7919 * (i + 1)) % kVocab);
      s.slots[i] = kPadSlot;
      s.pos[i] = 0;
      s.rope[i] = cuda::RopePosition::text(0);
      s.sample[i] = SamplingKnobs{.temperature = 0.0f};
    }
    forward_.enqueue_decode(b, kKindAll);
    runner_.staged_read_enqueued();
    graph(b, kKindAll);
  }
  // The token path once on the padding slot (its pages are its own until the scheduler binds them):
  // cuBLAS picks its kernels and the flash kernel sets its shared-memory limit here, not on a request.
  if constexpr (kPrefillChunk >= kTokenPieceMin) {
    std::vector<int32_t> ids(kTokenPieceMin);
    for (int i = 0; i < kTokenPieceMin; ++i) ids[size_t(i)] = int32_t((7919 * (i + 1)) % kVocab);
    bench_piece(kPadSlot, ids.data(), kTokenPieceMin, 0, kKindAll);
  }
  CUDA_CHECK(cudaStreamSynchronize(runner_.stream()));
  reset_slot(kPadSlot);
  char summary[256];
  std::snprintf(summary, sizeof summary, "%zu decode graphs captured and run, the token path warmed, in %.2f s",
                std::size(kBuckets), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const StaticFire& f = plan().static_fire;
  if (f.prompt.empty()) return std::string(summary) + "; no golden token in the plan (build with --golden to check one)";
  const int n = int(f.prompt.size());
  if (n >= kMaxContext) throw Error("static fire: the plan's prompt is longer than its context");
  for (int at = 0; at < n; at += int(kPrefillChunk)) {
    const int c = std::min(int(kPrefillChunk), n - at);
    prefill(0, f.prompt.data() + at, c, at, at + c == n ? c - 1 : c);
  }
  const int32_t got = host::argmax(logits((n - 1) % int(kPrefillChunk)), int(kVocab));
  reset_slot(0);
  CUDA_CHECK(cudaStreamSynchronize(runner_.stream()));
  static_fire_passed_ = got == f.token;
  char verdict[256];
  if (static_fire_passed_)
    std::snprintf(verdict, sizeof verdict, "; golden token %d after %d prompt tokens matches the reference", got, n);
  else
    std::snprintf(verdict, sizeof verdict, "; the golden prompt gave token %d, the reference's greedy token is %d "
                  "(reference margin %.3f)", got, f.token, f.margin);
  return summary + std::string(verdict);
}

}  // namespace rocket
