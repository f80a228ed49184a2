// The scheduler–engine contract (scheduler/step_contract.h) on the h200 plan's numbers (32 streams,
// buckets 1..32, 2048-row pieces) and a small host plan: what a mixed step may carry, and each bound
// refused with a message naming it. The calls that took the GPU server down (issue 38: a decode
// bucket's padding pushing the segment entries or rows past the piece) are among them.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "compiler/memory_map.h"
#include "fuel/chemistry.h"
#include "fuel/forge.h"
#include "scheduler/batch_engine.h"
#include "scheduler/step_contract.h"

namespace rocket {
namespace {

Plan plan_of(const std::string& booster, int prefill_chunk, std::vector<int> buckets) {
  Chemistry c = chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json");
  PlanOptions o;
  o.booster = booster;
  o.max_context = 4096;
  o.prefill_chunk = prefill_chunk;
  o.buckets = std::move(buckets);
  return plan_memory(c, o);
}

// A call's segments over `ids`: d decode rows (slots 0..d-1), then prompt pieces of the given lengths.
struct Call {
  std::vector<int32_t> ids = std::vector<int32_t>(8192, 7);
  std::vector<PrefillSegment> segments;
  std::vector<PrefillCapture> captures = std::vector<PrefillCapture>(64);
  Call(int d, const std::vector<int>& pieces) {
    int slot = 0;
    for (int i = 0; i < d; ++i) segments.push_back({.slot = slot++, .ids = ids.data(), .n = 1, .pos0 = 100});
    for (int n : pieces) segments.push_back({.slot = slot++, .ids = ids.data(), .n = n, .pos0 = 0});
  }
};

std::string refusal(const StepContract& c, const Call& call, int d) {
  try {
    c.check_prefill_batch(call.segments, d);
  } catch (const StepRefused& e) {
    return e.what();
  }
  return "";
}

TEST(StepContract, MixedRoomCountsTheBucketPadding) {
  const StepContract c(plan_of("h200", 2048, {1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(c.segment_entries(), 33);
  // 5 decode rows run as a bucket of 8: three padding rows take entries and rows.
  EXPECT_EQ(c.mixed_room(5).segments, 25);
  EXPECT_EQ(c.mixed_room(5).rows, 2040);
  EXPECT_EQ(c.mixed_room(1).segments, 31);  // 32 slots: one decodes, 31 may prefill
  EXPECT_EQ(c.mixed_room(17).segments, 1);  // bucket 32: 33 - 32 entries left
  EXPECT_EQ(c.mixed_room(31).segments, 1);
  EXPECT_EQ(c.mixed_room(32).segments, 0);  // every slot decodes
  EXPECT_EQ(c.mixed_room(0).segments, 0);
}

TEST(StepContract, RefusesWhatTheTokenPathCannotRun) {
  const StepContract c(plan_of("h200", 2048, {1, 2, 4, 8, 16, 32}));
  // 5 decode rows + 27 prompts: 32 segments + 3 padding = 35 entries of 33.
  EXPECT_NE(refusal(c, Call(5, std::vector<int>(27, 10)), 5).find("exceed the 33 segment entries"), std::string::npos);
  EXPECT_EQ(refusal(c, Call(5, std::vector<int>(25, 10)), 5), "");
  // 3 decode rows (bucket 4) + 2045 prompt rows: 2048 + 1 padding row.
  EXPECT_NE(refusal(c, Call(3, {2045}), 3).find("2049 rows (padding included) exceed the plan's prefill chunk 2048"),
            std::string::npos);
  EXPECT_EQ(refusal(c, Call(3, {2044}), 3), "");
  // The same segments, the one-row ones counted as prompts: no padding.
  EXPECT_EQ(refusal(c, Call(3, {2045}), 0), "");
  Call two_slots(2, {10});
  two_slots.segments[2].slot = 1;
  EXPECT_NE(refusal(c, two_slots, 2).find("a second segment of slot 1"), std::string::npos);
  Call long_decode(2, {10});
  long_decode.segments[1].n = 2;
  EXPECT_NE(refusal(c, long_decode, 2).find("a decode row is one row"), std::string::npos);
  Call capture(0, {200});
  capture.captures[0] = {.tokens = 100, .snapshot = 0};
  capture.segments[0].capture = &capture.captures[0];
  EXPECT_NE(refusal(c, capture, 0).find("not a multiple of 64"), std::string::npos);
  capture.captures[0].tokens = 128;
  EXPECT_EQ(refusal(c, capture, 0), "");
  Call past(0, {10});
  past.segments[0].pos0 = 4090;
  EXPECT_NE(refusal(c, past, 0).find("outside the plan's context 4096"), std::string::npos);
  Call vocab(0, {10});
  vocab.ids[3] = 1 << 30;
  EXPECT_NE(refusal(c, vocab, 0).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(refusal(c, Call(0, std::vector<int>(33, 1)), 0).find("1..32 segments"), std::string::npos);
  const int slots[2] = {4, 4};
  const int32_t ids[2] = {1, 2};
  const int64_t pos[2] = {0, 0};
  EXPECT_THROW(c.check_decode(2, ids, slots, pos), StepRefused);
  EXPECT_THROW(c.check_decode(33, ids, slots, pos), StepRefused);
}

// The call that took the GPU server down (9 decode rows, bucket 16, and four prompt pieces: fewer
// segments than the bucket): its layout holds exactly the bucket's 7 padding rows, between the decode
// rows and the prompts, and fills the 2048-row piece; the engine runs this layout (it once appended
// the bucket's remainder a second time after the prompts: 2051 rows).
TEST(StepContract, LayoutIsDecodeRowsThenPaddingThenPrompts) {
  const StepContract c(plan_of("h200", 2048, {1, 2, 4, 8, 16, 32}));
  const Call call(9, {93, 1, 1152, 786});
  const CallLayout L = c.check_prefill_batch(call.segments, 9);
  EXPECT_EQ(L.bucket, 16);
  EXPECT_EQ(L.rows, 2048);
  ASSERT_EQ(L.entries.size(), 20u);
  int row = 0;
  for (size_t i = 0; i < L.entries.size(); ++i) {
    const CallLayout::Entry& e = L.entries[i];
    const int want = i < 9 ? int(i) : i < 16 ? -1 : int(i) - 7;
    EXPECT_EQ(e.segment, want) << "entry " << i;
    EXPECT_EQ(e.row0, row) << "entry " << i;
    EXPECT_EQ(e.n, want < 0 ? 1 : call.segments[size_t(want)].n) << "entry " << i;
    row += e.n;
  }
  // Every segment decoding: the padding comes last.
  const CallLayout all = c.check_prefill_batch(Call(5, {}).segments, 5);
  EXPECT_EQ(all.entries.size(), 8u);
  EXPECT_EQ(all.entries.back().segment, -1);
  EXPECT_EQ(all.rows, 8);
}

// Whatever mixed_room allows, the check accepts: random decode counts and prompt pieces built the
// way the scheduler builds a mixed step (at most room.segments pieces, room.rows rows) on the h200
// plan and on a small one.
TEST(StepContract, EveryStepMixedRoomAllowsIsAccepted) {
  for (const StepContract& c : {StepContract(plan_of("h200", 2048, {1, 2, 4, 8, 16, 32})),
                                StepContract(plan_of("host", 64, {1, 2, 4, 8}))}) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 20000; ++trial) {
      const int d = 1 + int(rng() % uint32_t(c.max_streams()));
      const MixedRoom room = c.mixed_room(d);
      if (room.segments == 0) continue;
      std::vector<int> pieces;
      int rows = 0;
      const int k = 1 + int(rng() % uint32_t(room.segments));
      for (int i = 0; i < k && rows < room.rows; ++i) {
        const int n = std::min(room.rows - rows, 1 + int(rng() % (rng() % 2 ? 3u : uint32_t(room.rows))));
        pieces.push_back(n);
        rows += n;
      }
      const Call call(d, pieces);
      ASSERT_EQ(refusal(c, call, d), "") << "d " << d << ", " << pieces.size() << " pieces, " << rows << " rows";
    }
  }
}

TEST(StepContract, RefusesAPlanWhosePagesSplitACaptureQuantum) {
  Plan p = plan_of("host", 64, {1, 2, 4, 8});
  p.kv_page_tokens = 96;
  EXPECT_THROW(StepContract{p}, Error);
  p = plan_of("host", 64, {1, 2, 4, 8});
  p.buckets = {2, 4, 8};
  EXPECT_THROW(StepContract{p}, Error);
}

}  // namespace
}  // namespace rocket
