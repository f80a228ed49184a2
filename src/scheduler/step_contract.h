// StepContract: the scheduler–engine contract. Everything that bounds one engine call — the decode
// buckets, the rows and segment entries of a prefill call, the decode rows a mixed step may lead
// with, where a capture may fall — read from the plan in one place. The scheduler builds its steps
// from it; both engines (and the scheduler tests' stand-in) check every call against it with the same
// messages before doing any work, so a step one engine would refuse is refused by all of them, and CI's
// host-engine serving tests see what the GPU would.
//
// The bounds, for a prefill_batch call of S segments whose first d are decode rows (a mixed step):
//   segments        1 <= S <= max_streams, distinct slots in [0, max_streams); every segment's
//                   picks fit the largest bucket's sampler (S <= max bucket = max_streams)
//   decode rows     d <= S one-row segments without a capture, run as the bucket b = bucket_for(d);
//                   its b - d padding rows (on the padding slot) count as rows and segment entries,
//                   laid out after the decode rows and before the prompts (CallLayout)
//   segment entries S + (b - d) <= max_streams + 1 (the plan's stream slots: the token path's segment
//                   table holds one entry per slot)
//   rows            the segments' rows + (b - d) <= prefill_chunk
//   rows' content   token ids in the vocabulary, 0 <= pos0, pos0 + n <= max_context
//   captures        0 < tokens < n, a snapshot the plan has, and pos0 + tokens a multiple of
//                   kCaptureQuantum (the GDN chunk: the token path's scan has the state only there)
// A decode call: 1 <= n <= max bucket rows of distinct slots, token ids in the vocabulary, at
// positions < max_context.
// A draft or verify call (a drafting plan): one stream slot, 1 <= k <= draft_tokens, token ids in the
// vocabulary, its k + 1 rows at positions pos .. pos + k < max_context.
//
// A violation is StepRefused, thrown before the engine touches anything: the streams of that step fail
// and the others go on (Scheduler), instead of one bad step taking the process down.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/tiling/gdn.h"
#include "plan/plan.h"

namespace rocket {

struct PrefillSegment;

// Room for prompt pieces in a prefill_batch call that leads with decode rows (a mixed step).
struct MixedRoom {
  int segments = 0;  // prompt segments after the decode rows
  int rows = 0;      // prompt rows in all
};

// One prefill call's rows as every engine lays them out: the decode rows (segments 0..d-1, one row
// each), then the decode bucket's padding rows, then the prompt pieces. The h200 token path runs
// exactly these entries; the check counts exactly these rows and entries, so the two cannot disagree.
struct CallLayout {
  struct Entry {
    int segment = -1;  // the segment it runs; -1: a padding row of the decode bucket
    int row0 = 0;      // its first row in the call
    int n = 0;
  };
  std::vector<Entry> entries;
  int bucket = 0;  // the decode rows' bucket, 0 without decode rows
  int rows = 0;    // padding included
};

// A call outside the contract, refused before any work: the device and every slot are as they were.
class StepRefused : public Error {
 public:
  explicit StepRefused(const std::string& what) : Error(what) {}
};

class StepContract {
 public:
  // A capture inside a prefill call ends on a multiple of this many positions (the token path's GDN
  // chunk, where its scan holds the state); the prefix cache's pages are whole multiples of it.
  static constexpr int kCaptureQuantum = tiling::kGdnChunk;

  // Throws Error when the plan's numbers cannot form a contract (no buckets, buckets past the
  // streams, pages that split a capture quantum).
  explicit StepContract(const Plan& plan);

  int max_streams() const { return max_streams_; }
  int max_bucket() const { return buckets_.back(); }
  int prefill_chunk() const { return prefill_chunk_; }
  int max_context() const { return max_context_; }
  int snapshots() const { return snapshots_; }
  const std::vector<int>& buckets() const { return buckets_; }
  // Segment entries of one prefill call, padding rows included: the plan's stream slots.
  int segment_entries() const { return max_streams_ + 1; }
  // The smallest compiled bucket holding n rows. REQUIRES: 1 <= n <= max_bucket().
  int bucket_for(int n) const;
  // What a prefill_batch call leading with d >= 1 decode rows may carry besides: {0, 0} when nothing.
  MixedRoom mixed_room(int d) const;

  // The call's layout (CallLayout). REQUIRES: 0 <= decode_rows <= segments.size(), decode_rows <= max_bucket().
  CallLayout layout(std::span<const PrefillSegment> segments, int decode_rows) const;
  // Throws StepRefused naming the first bound the call breaks, and the call's shape; else its layout.
  CallLayout check_prefill_batch(std::span<const PrefillSegment> segments, int decode_rows) const;
  void check_decode(int n, const int32_t* ids, const int* slots, const int64_t* pos) const;
  int draft_tokens() const { return draft_tokens_; }
  // A draft (ids: the token it follows) or a verify call (ids: its k + 1 rows).
  void check_speculative(const char* call, int slot, const int32_t* ids, int n_ids, int k, int64_t pos) const;

 private:
  std::vector<int> buckets_;
  int max_streams_, prefill_chunk_, max_context_, snapshots_, vocab_, draft_tokens_;
};

}  // namespace rocket
