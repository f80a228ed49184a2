// Page pool, snapshot store and cache geometry against the plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "cache/geometry.h"
#include "cache/page_pool.h"
#include "cache/snapshot_store.h"
#include "compiler/memory_map.h"
#include "core/error.h"
#include "fuel/forge.h"

namespace rocket {
namespace {

TEST(PagePool, AllocatesEveryPageOnceThenReportsExhaustion) {
  PagePool pool(8);
  std::set<int> got;
  for (int i = 0; i < 8; ++i) {
    std::optional<int> p = pool.alloc();
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(pool.refcount(*p), 1);
    got.insert(*p);
  }
  EXPECT_EQ(got.size(), 8u);
  EXPECT_EQ(pool.free_count(), 0);
  // Exhaustion is a value: the caller can wait and try again.
  EXPECT_FALSE(pool.alloc().has_value());
  EXPECT_EQ(pool.audit(), "");
  EXPECT_TRUE(pool.release(5));
  EXPECT_EQ(pool.alloc(), std::optional<int>(5));
  EXPECT_EQ(pool.audit(), "");
}

TEST(PagePool, RefcountsRetainAndRelease) {
  PagePool pool(4);
  const int p = *pool.alloc();
  pool.retain(p);
  pool.retain(p);
  EXPECT_EQ(pool.refcount(p), 3);
  EXPECT_FALSE(pool.release(p));
  EXPECT_FALSE(pool.release(p));
  EXPECT_EQ(pool.free_count(), 3);
  EXPECT_TRUE(pool.release(p));
  EXPECT_EQ(pool.refcount(p), 0);
  EXPECT_EQ(pool.free_count(), 4);
  EXPECT_EQ(pool.audit(), "");
}

TEST(PagePoolDeathTest, ReleasingAFreePageIsAProgrammingError) {
  PagePool pool(2);
  const int p = *pool.alloc();
  pool.release(p);
  EXPECT_DEATH(pool.release(p), "release of a free");
  EXPECT_DEATH(pool.retain(p), "retain of a free");
}

TEST(PagePool, RandomTrafficKeepsInvariantsAndReturnsEverything) {
  PagePool pool(64);
  std::mt19937 rng(7);
  std::vector<int> held;  // one entry per reference we hold
  for (int step = 0; step < 5000; ++step) {
    const int op = int(rng() % 3);
    if (op == 0) {
      if (std::optional<int> p = pool.alloc()) held.push_back(*p);
      else EXPECT_EQ(pool.free_count(), 0);
    } else if (op == 1 && !held.empty()) {
      const int p = held[rng() % held.size()];
      pool.retain(p);
      held.push_back(p);
    } else if (!held.empty()) {
      const size_t i = rng() % held.size();
      const int p = held[i];
      held.erase(held.begin() + i);
      EXPECT_EQ(pool.release(p), std::count(held.begin(), held.end(), p) == 0);
    }
    ASSERT_EQ(pool.audit(), "") << "step " << step;
    for (int p = 0; p < pool.size(); ++p)
      ASSERT_EQ(pool.refcount(p), std::count(held.begin(), held.end(), p)) << "page " << p;
  }
  for (int p : held) pool.release(p);
  EXPECT_EQ(pool.free_count(), pool.size());
  EXPECT_EQ(pool.audit(), "");
}

TEST(SnapshotStore, CapturesAndRestoresBytesPerSlot) {
  constexpr int kSlots = 3;
  constexpr uint64_t kSlotBytes = 256;
  std::vector<std::byte> memory(kSlots * kSlotBytes);
  SnapshotStore store(memory, kSlots, kSlotBytes);
  EXPECT_EQ(store.offset(2), 2 * kSlotBytes);
  std::mt19937 rng(3);
  std::vector<std::vector<std::byte>> states(kSlots, std::vector<std::byte>(200));
  for (int s = 0; s < kSlots; ++s) {
    for (auto& b : states[s]) b = std::byte(rng());
    store.capture(s, states[s]);
  }
  for (int s = 0; s < kSlots; ++s) {
    std::vector<std::byte> back(200);
    store.restore(s, back);
    EXPECT_EQ(back, states[s]) << "slot " << s;
  }
}

Plan tiny_plan() {
  Chemistry c = chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json");
  return plan_memory(c, PlanOptions{.booster = "host", .max_context = 512});
}

Plan a3b_plan() {
  Chemistry c = chemistry_from_config(forge_config("a3b", 4), WeightFormat::kNVFP4, "a3b/config.json");
  return plan_memory(c, PlanOptions{.booster = "h200", .max_context = 4096});
}

TEST(CacheGeometry, PagesTimesPageBytesIsThePlansKvRegion) {
  for (const Plan& plan : {tiny_plan(), a3b_plan()}) {
    SCOPED_TRACE(plan.booster);
    const CacheGeometry g = CacheGeometry::from_plan(plan, 2 * plan.max_streams);
    const PlanBuffer& kv = plan.buffer("kv_cache");
    EXPECT_EQ(g.kv_bytes(), kv.bytes);
    EXPECT_EQ(g.page_bytes() % (64 * 1024), 0u);
    EXPECT_EQ(g.page_tokens, plan.kv_page_tokens);
    EXPECT_EQ(g.layer_pages, 2 * plan.chemistry.full_layers());
    // The engines' layout of kv_cache: the last plan page of the last cache page ends exactly at the
    // end of the buffer, and cache pages follow each other at the geometry's page size.
    const KvLayout layout{.full_layers = plan.chemistry.full_layers(), .page_bytes = plan.kv_page_bytes};
    EXPECT_EQ(layout.offset(g.pages - 1, g.layer_pages / 2 - 1, 1) + layout.page_bytes, kv.bytes);
    EXPECT_EQ(layout.offset(1, 0, 0), g.page_bytes());
    EXPECT_EQ(layout.cache_page_bytes(), g.page_bytes());
    EXPECT_EQ(layout.offset(0, 0, 1), layout.page_bytes);  // V follows its layer's K
    const SnapshotLayout s = SnapshotLayout::of(plan.chemistry);
    EXPECT_EQ(s.recurrent_bytes, uint64_t(plan.chemistry.linear_layers()) * plan.chemistry.lin_v_heads *
                                     plan.chemistry.lin_k_dim * plan.chemistry.lin_v_dim * 4);
    EXPECT_EQ(s.conv_bytes, uint64_t(plan.chemistry.linear_layers()) * plan.chemistry.conv_dim() *
                                (plan.chemistry.conv_kernel - 1) * 4);
    EXPECT_EQ(s.conv_offset(), s.recurrent_bytes);
    EXPECT_EQ(g.snapshot_bytes, s.slot_bytes());
    EXPECT_GE(g.snapshot_bytes, s.state_bytes());
    EXPECT_EQ(g.snapshot_region_bytes(), uint64_t(g.snapshot_slots) * g.snapshot_bytes);
  }
  // a3b on the H200: 2 KV heads × 256 × bf16 = 1 KiB per token and layer: 64-token pages.
  EXPECT_EQ(CacheGeometry::from_plan(a3b_plan(), 64).page_tokens, 64);
}

// The Error's message must name what is wrong.
void expect_refusal(const CacheGeometry& g, const Plan& plan, const std::string& words) {
  try {
    g.validate(plan);
    ADD_FAILURE() << "geometry accepted; expected an error mentioning '" << words << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(CacheGeometry, RefusesAGeometryThatDisagreesWithThePlan) {
  const Plan plan = tiny_plan();
  const CacheGeometry good = CacheGeometry::from_plan(plan, 2 * plan.max_streams);
  EXPECT_NO_THROW(good.validate(plan));

  CacheGeometry g = good;
  g.pages -= 1;
  expect_refusal(g, plan, "kv_cache buffer");
  g = good;
  g.page_tokens *= 2;
  expect_refusal(g, plan, "page_tokens");
  g = good;
  g.layer_page_bytes *= 2;
  expect_refusal(g, plan, "KV page");
  g = good;
  g.snapshot_bytes += 64 * 1024;
  expect_refusal(g, plan, "recurrent state");
  g = good;
  g.snapshot_slots = plan.max_streams;
  expect_refusal(g, plan, "snapshot slots");
  g = good;
  g.max_context = plan.max_context / 2;
  expect_refusal(g, plan, "max_context");
  g = good;
  g.layer_page_bytes = 1000;
  expect_refusal(g, plan, "64 KiB");
  g = good;
  g.snapshot_slots = plan.state_snapshots + 1;  // more than the plan's snapshot region holds
  expect_refusal(g, plan, "state_snapshots region");
}

TEST(CacheGeometry, RefusesAPoolThatCannotHoldOneStream) {
  CacheGeometry g{.page_tokens = 16, .pages = 3, .layer_pages = 2, .layer_page_bytes = 64 * 1024,
                  .snapshot_slots = 4, .snapshot_bytes = 64 * 1024, .max_context = 64};
  try {
    g.validate();
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot hold one stream at max_context 64"), std::string::npos) << e.what();
  }
  g.pages = 4;
  EXPECT_NO_THROW(g.validate());
}

TEST(CacheGeometry, RefusesAPlanWhoseKvPagesAreNotWholeCachePages) {
  Plan plan = tiny_plan();
  plan.kv_pages += 1;
  EXPECT_THROW(CacheGeometry::from_plan(plan, 2 * plan.max_streams), Error);
}

}  // namespace
}  // namespace rocket
