// The radix tree: page-aligned matching that resumes only where a snapshot is, insertion with
// dedup and edge splits, locks, LRU eviction of pages and of snapshots.
#include <gtest/gtest.h>

#include <climits>
#include <numeric>

#include "cache/radix_cache.h"

#include "cache_fixtures.h"

namespace rocket {
namespace {

using test::kP;
using test::seq;
using test::small_geometry;

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// What a stream that computed `tokens` from scratch and then left would hand the cache: fresh pages
// and a snapshot, inserted, then its own references dropped. Returns the pages it used.
std::vector<int> cache_computed(RadixCache& cache, const std::vector<int32_t>& tokens, Insertion* out = nullptr) {
  std::vector<int> pages;
  for (size_t i = 0; i < tokens.size() / kP; ++i) pages.push_back(*cache.pages().alloc());
  const int snap = *cache.snapshots().alloc();
  Insertion r = cache.insert(tokens, pages, snap);
  if (out) *out = r;
  for (int p : pages) cache.pages().release(p);
  cache.snapshots().release(snap);
  return pages;
}

void expect_consistent(const RadixCache& cache) {
  EXPECT_EQ(cache.audit(), "");
  std::vector<int> pages(cache.pages().size()), snaps(cache.snapshots().size());
  cache.add_refs(pages, snaps);
  for (int p = 0; p < cache.pages().size(); ++p) EXPECT_EQ(pages[p], cache.pages().refcount(p)) << "page " << p;
  for (int s = 0; s < cache.snapshots().size(); ++s)
    EXPECT_EQ(snaps[s], cache.snapshots().refcount(s)) << "snapshot " << s;
}

TEST(RadixCache, MatchResumesAtTheDeepestSnapshotBoundaryOnly) {
  RadixCache cache(small_geometry());
  const auto a = seq(100, 12);  // three pages, snapshot at 12
  const std::vector<int> pages = cache_computed(cache, a);
  expect_consistent(cache);

  PrefixMatch m = cache.match(cat(a, seq(500, 6)));
  EXPECT_EQ(m.tokens, 12);
  EXPECT_EQ(m.pages, pages);
  ASSERT_TRUE(m.snapshot.has_value());

  // Agreeing on 8 tokens then diverging: the tree holds KV for 8 tokens but no state at 8.
  m = cache.match(cat(seq(100, 8), seq(900, 8)));
  EXPECT_EQ(m.tokens, 0);
  EXPECT_TRUE(m.pages.empty());
  EXPECT_FALSE(m.snapshot.has_value());
  // 11 of the 12 tokens: the boundary at 12 is not reached.
  EXPECT_EQ(cache.match(seq(100, 11)).tokens, 0);

  // A snapshot at 8 splits the edge and becomes resumable, with the original pages.
  Insertion r;
  cache_computed(cache, seq(100, 8), &r);
  EXPECT_EQ(r.new_pages, 0);
  EXPECT_TRUE(r.snapshot_adopted);
  EXPECT_EQ(cache.nodes(), 2);
  m = cache.match(cat(seq(100, 8), seq(900, 8)));
  EXPECT_EQ(m.tokens, 8);
  EXPECT_EQ(m.pages, std::vector<int>(pages.begin(), pages.begin() + 2));
  EXPECT_EQ(cache.match(seq(100, 11)).tokens, 8);
  EXPECT_EQ(cache.match(a).tokens, 12);
  expect_consistent(cache);
}

TEST(RadixCache, CachedPrefixCountsSharedPagesWithoutASnapshot) {
  RadixCache cache(small_geometry());
  const auto a = seq(100, 12);  // three pages, snapshot at 12 only
  cache_computed(cache, a);
  const auto newest_access = [&] {
    uint64_t t = 0;
    cache.visit([&](const CachedPrefix& p) { t = std::max(t, p.last_access); });
    return t;
  };
  const uint64_t before = newest_access();

  // Sharing two pages then diverging mid-edge: the pages are there, the state at 8 is not.
  const auto b = cat(seq(100, 8), seq(900, 8));
  EXPECT_EQ(cache.cached_prefix(b), 8);
  EXPECT_EQ(newest_access(), before);  // a query: it touches nothing
  EXPECT_EQ(cache.match(b).tokens, 0);
  // A partial page counts nothing; a whole match counts the whole edge; nothing shared counts 0.
  EXPECT_EQ(cache.cached_prefix(cat(seq(100, 8), seq(108, 3))), 8);
  EXPECT_EQ(cache.cached_prefix(cat(a, seq(500, 6))), 12);
  EXPECT_EQ(cache.cached_prefix(seq(900, 16)), 0);

  // Once a stream captures and inserts at the branch point, match resumes there; the tree splits the
  // edge and every prefix keeps its pages.
  cache_computed(cache, seq(100, 8));
  EXPECT_EQ(cache.match(b).tokens, 8);
  EXPECT_EQ(cache.cached_prefix(a), 12);
  expect_consistent(cache);
}

TEST(RadixCache, MatchIsPageAlignedAndTokenExact) {
  RadixCache cache(small_geometry());
  cache_computed(cache, seq(0, 8));
  cache_computed(cache, seq(0, 4));
  // One token differs inside the second page: only the first page's boundary resumes.
  auto q = seq(0, 8);
  q[6] = 77;
  EXPECT_EQ(cache.match(q).tokens, 4);
  // Siblings sharing a first token but not a first page are distinct children.
  auto b = seq(0, 8);
  b[3] = 55;
  cache_computed(cache, b);
  EXPECT_EQ(cache.match(b).tokens, 8);
  EXPECT_EQ(cache.match(seq(0, 8)).tokens, 8);
  EXPECT_EQ(cache.match(seq(0, 3)).tokens, 0);
  expect_consistent(cache);
}

TEST(RadixCache, InsertKeepsCachedPagesAndSnapshotsAndLeavesDuplicatesToTheCaller) {
  RadixCache cache(small_geometry());
  const auto a = seq(10, 8);
  const std::vector<int> first = cache_computed(cache, a);
  const int first_snapshot = *cache.match(a).snapshot;
  // A second stream computed the same 8 tokens into its own pages, plus 4 more.
  const auto longer = cat(a, seq(70, 4));
  std::vector<int> mine;
  for (int i = 0; i < 3; ++i) mine.push_back(*cache.pages().alloc());
  const int snap = *cache.snapshots().alloc();
  Insertion r = cache.insert(longer, mine, snap);
  EXPECT_EQ(r.new_pages, 1);  // only the third page was new
  EXPECT_TRUE(r.snapshot_adopted);
  EXPECT_EQ(cache.pages().refcount(mine[0]), 1);  // still only the caller's
  EXPECT_EQ(cache.pages().refcount(mine[2]), 2);  // caller + cache
  PrefixMatch m = cache.match(longer);
  EXPECT_EQ(m.pages, (std::vector<int>{first[0], first[1], mine[2]}));
  // Same boundary again: the cached snapshot stays; the caller's is not taken.
  const int snap2 = *cache.snapshots().alloc();
  r = cache.insert(a, std::vector<int>{mine[0], mine[1]}, snap2);
  EXPECT_FALSE(r.snapshot_adopted);
  EXPECT_EQ(r.new_pages, 0);
  EXPECT_EQ(*cache.match(a).snapshot, first_snapshot);
  for (int p : mine) cache.pages().release(p);
  cache.snapshots().release(snap);
  cache.snapshots().release(snap2);
  expect_consistent(cache);
  EXPECT_EQ(cache.pages().used_count(), 3);
  EXPECT_EQ(cache.snapshots().used_count(), 2);
}

TEST(RadixCache, EvictionIsRefusedWhileLockedEvenWhenTheSplitMovesTheBoundary) {
  RadixCache cache(small_geometry(/*pages=*/8, /*snapshots=*/8, /*max_context=*/32));
  const auto a = seq(0, 12);
  cache_computed(cache, a);
  PrefixMatch m = cache.match(a);
  cache.lock(m.node);
  // A later insert splits the locked node's edge: the new upper node inherits the lock.
  cache_computed(cache, cat(seq(0, 4), seq(300, 4)));
  expect_consistent(cache);
  EXPECT_EQ(cache.evict(INT_MAX), 1);  // only the unlocked sibling's own page
  EXPECT_EQ(cache.evict_snapshots(INT_MAX), 0);
  EXPECT_EQ(cache.match(a).tokens, 12);
  EXPECT_EQ(cache.cached_pages(), 3);
  // With every other page taken, nothing can be freed for a newcomer: a value, not a crash.
  std::vector<int> taken;
  while (std::optional<int> p = cache.alloc_page()) taken.push_back(*p);
  EXPECT_EQ(taken.size(), 5u);
  EXPECT_FALSE(cache.alloc_page().has_value());
  EXPECT_EQ(cache.match(a).tokens, 12);
  cache.unlock(m.node);
  EXPECT_EQ(cache.audit(), "");
  // Unlocked, the entry is evictable: the next allocation takes the LRU leaf.
  std::optional<int> p = cache.alloc_page();
  ASSERT_TRUE(p.has_value());
  taken.push_back(*p);
  EXPECT_EQ(cache.match(a).tokens, 0);
  EXPECT_EQ(cache.nodes(), 0);
  for (int q : taken) cache.pages().release(q);
  expect_consistent(cache);
  EXPECT_EQ(cache.pages().free_count(), cache.pages().size());
}

TEST(RadixCache, EvictsLeastRecentlyUsedLeavesFirst) {
  RadixCache cache(small_geometry());
  const auto a = seq(100, 4), b = seq(200, 4), c = seq(300, 4);
  cache_computed(cache, a);
  cache_computed(cache, b);
  cache_computed(cache, c);
  EXPECT_EQ(cache.match(a).tokens, 4);  // a is now the most recently used
  EXPECT_EQ(cache.evict(1), 1);         // b: inserted before c, untouched since
  EXPECT_EQ(cache.match(b).tokens, 0);
  EXPECT_EQ(cache.match(c).tokens, 4);  // c now newer than a
  EXPECT_EQ(cache.evict(1), 1);
  EXPECT_EQ(cache.match(a).tokens, 0);
  EXPECT_EQ(cache.match(c).tokens, 4);
  EXPECT_EQ(cache.evict(1), 1);
  EXPECT_EQ(cache.nodes(), 0);
  EXPECT_EQ(cache.evict(1), 0);
  expect_consistent(cache);
  EXPECT_EQ(cache.pages().free_count(), cache.pages().size());
}

// The replicated front's question (Scheduler::report_prefix): what match() would resume from, asked
// without touching the LRU order, so a report for a request routed elsewhere keeps nothing alive.
TEST(RadixCache, ResumablePrefixAnswersAsMatchWithoutTouching) {
  RadixCache cache(small_geometry());
  const auto a = seq(100, 8), b = seq(200, 4);
  cache_computed(cache, a);
  cache_computed(cache, b);  // b is the most recently used
  EXPECT_EQ(cache.resumable_prefix(cat(a, seq(900, 3))), 8);
  EXPECT_EQ(cache.resumable_prefix(seq(100, 7)), 0);  // the boundary at 8 is not reached
  EXPECT_EQ(cache.resumable_prefix(cat(seq(100, 4), seq(900, 4))), 0);  // pages shared, no state at 4
  EXPECT_EQ(cache.cached_prefix(cat(seq(100, 4), seq(900, 4))), 4);
  // Had the reports touched a, b would go first; a is still the least recently used.
  EXPECT_EQ(cache.evict(2), 2);
  EXPECT_EQ(cache.match(a).tokens, 0);
  EXPECT_EQ(cache.match(b).tokens, 4);
  expect_consistent(cache);
}

TEST(RadixCache, EvictingALeafPrunesAncestorsThatCanNoLongerBeResumed) {
  RadixCache cache(small_geometry());
  // Two branches below a snapshot-less split point at 4: {0..4}{a}, {0..4}{b}.
  cache_computed(cache, cat(seq(0, 4), seq(100, 8)));
  cache_computed(cache, cat(seq(0, 4), seq(200, 4)));
  EXPECT_EQ(cache.nodes(), 3);
  EXPECT_EQ(cache.match(cat(seq(0, 4), seq(200, 4))).tokens, 8);  // b newer
  EXPECT_EQ(cache.evict(1), 2);  // a's leaf (2 pages) goes; the split point still leads to b
  EXPECT_EQ(cache.nodes(), 2);
  EXPECT_EQ(cache.evict(1), 2);  // b's leaf, then the split point, now a leaf without a snapshot
  EXPECT_EQ(cache.nodes(), 0);
  expect_consistent(cache);
}

TEST(RadixCache, SnapshotsAreEvictedLruAndAnInnerNodeKeepsItsPages) {
  RadixCache cache(small_geometry(32, /*snapshots=*/3));
  const auto base = seq(0, 4), deep = cat(seq(0, 4), seq(50, 4)), other = seq(900, 4);
  cache_computed(cache, base);   // snapshot at 4
  cache_computed(cache, deep);   // snapshot at 8, child of base
  cache_computed(cache, other);  // all three slots in use
  EXPECT_EQ(cache.snapshots().free_count(), 0);
  cache.match(other);
  cache.match(deep);  // touches the path: base and deep are now newer than other
  std::optional<int> s = cache.alloc_snapshot();  // evicts the LRU snapshot: other's (a leaf, whole)
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(cache.match(other).tokens, 0);
  EXPECT_EQ(cache.match(deep).tokens, 8);
  cache.snapshots().release(*s);
  // Inner node: base (same access time as deep, created first) loses its snapshot, not its pages.
  EXPECT_EQ(cache.evict_snapshots(1), 1);
  EXPECT_EQ(cache.match(cat(base, seq(700, 3))).tokens, 0);
  EXPECT_EQ(cache.match(deep).tokens, 8);
  EXPECT_EQ(cache.cached_pages(), 2);
  expect_consistent(cache);
}

TEST(RadixCache, SnapshotAllocationFailsCleanlyWhenAllAreLocked) {
  RadixCache cache(small_geometry(32, /*snapshots=*/2));
  cache_computed(cache, seq(0, 4));
  cache_computed(cache, seq(100, 4));
  PrefixMatch a = cache.match(seq(0, 4)), b = cache.match(seq(100, 4));
  cache.lock(a.node);
  cache.lock(b.node);
  EXPECT_FALSE(cache.alloc_snapshot().has_value());
  cache.unlock(b.node);
  std::optional<int> s = cache.alloc_snapshot();
  EXPECT_EQ(s, b.snapshot);
  EXPECT_EQ(cache.match(seq(100, 4)).tokens, 0);
  cache.snapshots().release(*s);
  cache.unlock(a.node);
  expect_consistent(cache);
}

TEST(RadixCache, VisitShowsEveryPrefixWithItsPagesAndSnapshot) {
  RadixCache cache(small_geometry());
  const std::vector<int> pa = cache_computed(cache, seq(0, 8));
  cache_computed(cache, cat(seq(0, 4), seq(40, 4)));
  std::vector<std::pair<std::vector<int32_t>, bool>> seen;
  cache.visit([&](const CachedPrefix& p) {
    seen.push_back({std::vector<int32_t>(p.tokens.begin(), p.tokens.end()), p.snapshot.has_value()});
    EXPECT_EQ(p.pages.size() * kP, p.tokens.size());
  });
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], std::make_pair(seq(0, 4), false));  // the split point
  EXPECT_EQ(seen[1], std::make_pair(seq(0, 8), true));
  EXPECT_EQ(seen[2], std::make_pair(cat(seq(0, 4), seq(40, 4)), true));
}

TEST(RadixCache, ReferenceCrossCheckCatchesAnUnaccountedReference) {
  // Negative control for the stress test's leak check: a reference nobody records is visible.
  RadixCache cache(small_geometry());
  const std::vector<int> pages = cache_computed(cache, seq(0, 8));
  cache.pages().retain(pages[1]);
  std::vector<int> refs(cache.pages().size()), snaps(cache.snapshots().size());
  cache.add_refs(refs, snaps);
  EXPECT_NE(refs[pages[1]], cache.pages().refcount(pages[1]));
  EXPECT_EQ(cache.audit(), "");  // the tree itself is sound; the extra holder is what leaks
  cache.pages().release(pages[1]);
}

}  // namespace
}  // namespace rocket
