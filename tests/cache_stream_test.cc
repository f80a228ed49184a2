// Stream page tables over the cache: fork sharing, copy-on-extend, fork chains, detach/resume with
// the recurrent state restored byte for byte, exhaustion, and a randomized stress test against a
// reference model with a simulated engine writing token ids into pages and states into snapshots.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "cache/snapshot_store.h"
#include "cache/stream_pages.h"

#include "cache_fixtures.h"

namespace rocket {
namespace {

using test::kP;
using test::seq;
using test::small_geometry;

// Stands in for the engine: KV "bytes" are the token id each page row was written with, applying
// the reported copies first; a recurrent state is a pseudo-random function of the token prefix
// (what the model guarantees: same prefix, same state). A stream that wrote into a page another
// holder reads, or a snapshot slot handed out while still cached, shows up as a mismatch.
class Engine {
 public:
  static constexpr size_t kStateBytes = 200;

  explicit Engine(RadixCache& cache)
      : cache_(cache),
        kv_(cache.pages().size(), std::vector<int32_t>(kP, -1)),
        memory_(size_t(cache.snapshots().size()) * kStateBytes),
        store_(memory_, cache.snapshots().size(), kStateBytes) {}

  // Runs an extension the way the engine would: the copy, then the new rows.
  void write(const StreamPages& s, const Extension& e, int old_len) {
    if (e.copy) {
      std::copy_n(kv_[e.copy->src].begin(), e.copy->tokens, kv_[e.copy->dst].begin());
      std::fill(kv_[e.copy->dst].begin() + e.copy->tokens, kv_[e.copy->dst].end(), -1);
      ++copies;
    }
    for (int i = old_len; i < s.length(); ++i) kv_[s.pages()[i / kP]][i % kP] = s.tokens()[i];
  }

  // Rows [from, length) computed again with the stream's tokens (a verify step writes its drafts' rows).
  void rewrite(const StreamPages& s, int from) {
    for (int i = from; i < s.length(); ++i) kv_[s.pages()[i / kP]][i % kP] = s.tokens()[i];
  }

  std::optional<Extension> extend(StreamPages& s, std::span<const int32_t> tokens) {
    const int old_len = s.length();
    std::optional<Extension> e = s.extend(tokens);
    if (e) write(s, *e, old_len);
    return e;
  }

  static std::vector<std::byte> state_of(std::span<const int32_t> prefix) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : prefix) h = (h ^ uint32_t(t)) * 1099511628211ull;
    std::mt19937_64 rng(h);
    std::vector<std::byte> state(kStateBytes);
    for (auto& b : state) b = std::byte(rng());
    return state;
  }

  // Capture at boundary `at` (default: the stream's length); false when no slot could be had.
  bool capture(StreamPages& s, int at = -1) {
    if (at < 0) at = s.length();
    std::optional<int> slot = s.capture_snapshot(at);
    if (!slot) return false;
    store_.capture(*slot, state_of(s.tokens().first(at)));
    return true;
  }

  std::vector<std::byte> restore(int slot) const {
    std::vector<std::byte> state(kStateBytes);
    store_.restore(slot, state);
    return state;
  }

  // Every row the stream can read holds its own token.
  std::string check_kv(std::span<const int32_t> tokens, std::span<const int> pages) const {
    for (size_t i = 0; i < tokens.size(); ++i)
      if (kv_[pages[i / kP]][i % kP] != tokens[i])
        return "token " + std::to_string(i) + " reads " + std::to_string(kv_[pages[i / kP]][i % kP]) +
               " from page " + std::to_string(pages[i / kP]) + ", wrote " + std::to_string(tokens[i]);
    return {};
  }

  bool snapshot_holds(int slot, std::span<const int32_t> prefix) const { return restore(slot) == state_of(prefix); }

  int copies = 0;

 private:
  RadixCache& cache_;
  std::vector<std::vector<int32_t>> kv_;
  std::vector<std::byte> memory_;
  SnapshotStore store_;
};

// Every reference in the pools is accounted for by the tree and the given streams.
void expect_refs_accounted(const RadixCache& cache, const std::vector<const StreamPages*>& streams) {
  std::vector<int> pages(cache.pages().size()), snaps(cache.snapshots().size());
  cache.add_refs(pages, snaps);
  for (const StreamPages* s : streams) s->add_refs(pages, snaps);
  for (int p = 0; p < cache.pages().size(); ++p) ASSERT_EQ(pages[p], cache.pages().refcount(p)) << "page " << p;
  for (int s = 0; s < cache.snapshots().size(); ++s)
    ASSERT_EQ(snaps[s], cache.snapshots().refcount(s)) << "snapshot " << s;
}

TEST(StreamPages, ForkSharesEveryPageByRefcount) {
  RadixCache cache(small_geometry());
  Engine engine(cache);
  StreamPages s(cache);
  ASSERT_TRUE(engine.extend(s, seq(0, 10)));
  ASSERT_EQ(s.pages().size(), 3u);
  {
    StreamPages f = s.fork();
    EXPECT_TRUE(std::equal(f.pages().begin(), f.pages().end(), s.pages().begin(), s.pages().end()));
    for (int p : s.pages()) EXPECT_EQ(cache.pages().refcount(p), 2);
    EXPECT_EQ(cache.pages().used_count(), 3);
    expect_refs_accounted(cache, {&s, &f});
  }
  for (int p : s.pages()) EXPECT_EQ(cache.pages().refcount(p), 1);
  EXPECT_EQ(engine.check_kv(s.tokens(), s.pages()), "");
}

TEST(StreamPages, CopyOnExtendPrivatisesOnlyTheBoundaryPage) {
  RadixCache cache(small_geometry());
  Engine engine(cache);
  StreamPages s(cache);
  ASSERT_TRUE(engine.extend(s, seq(0, 10)));  // pages: full, full, 2 of 4 rows
  StreamPages f = s.fork();
  const std::vector<int> before(s.pages().begin(), s.pages().end());

  std::optional<Extension> e = engine.extend(f, seq(500, 1));
  ASSERT_TRUE(e && e->copy);
  EXPECT_EQ(e->copy->src, before[2]);
  EXPECT_EQ(e->copy->tokens, 2);
  EXPECT_EQ(e->first_page, 2);
  EXPECT_EQ(f.pages()[0], before[0]);
  EXPECT_EQ(f.pages()[1], before[1]);
  EXPECT_EQ(f.pages()[2], e->copy->dst);
  EXPECT_NE(e->copy->dst, before[2]);
  EXPECT_EQ(cache.pages().refcount(before[0]), 2);  // full pages stay shared
  EXPECT_EQ(cache.pages().refcount(before[1]), 2);
  EXPECT_EQ(cache.pages().refcount(before[2]), 1);  // the boundary page is s's alone again
  // s now owns its boundary page exclusively: no copy for it.
  e = engine.extend(s, seq(600, 3));
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->copy);
  EXPECT_EQ(s.pages()[2], before[2]);
  EXPECT_EQ(s.pages().size(), 4u);
  EXPECT_EQ(engine.check_kv(s.tokens(), s.pages()), "");
  EXPECT_EQ(engine.check_kv(f.tokens(), f.pages()), "");

  // Forked on a page boundary, nothing is partially filled: extending takes a fresh page, no copy.
  StreamPages g = s.fork();
  ASSERT_EQ(g.length() % kP, 1);
  StreamPages aligned(cache);
  ASSERT_TRUE(engine.extend(aligned, seq(50, 8)));
  StreamPages h = aligned.fork();
  e = engine.extend(h, seq(70, 2));
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->copy);
  EXPECT_EQ(e->first_page, 2);
  expect_refs_accounted(cache, {&s, &f, &g, &aligned, &h});
}

TEST(StreamPages, FourDeepForkChainSharesFullPagesAndIsolatesEachBoundary) {
  RadixCache cache(small_geometry());
  Engine engine(cache);
  std::vector<StreamPages> chain;
  chain.emplace_back(cache);
  ASSERT_TRUE(engine.extend(chain[0], seq(0, 6)));
  for (int depth = 1; depth < 4; ++depth) {
    chain.push_back(chain.back().fork());
    const int fill = chain.back().length() % kP;
    std::optional<Extension> e = engine.extend(chain.back(), seq(1000 * depth, 3));
    ASSERT_TRUE(e);
    // Each fork writes into a boundary page its parent still holds, so each privatises it.
    EXPECT_TRUE(fill == 0 || e->copy.has_value()) << "depth " << depth;
  }
  // Lengths 6, 9, 12, 15. Page 0 (tokens 0-3) is shared by all four streams.
  const int first = chain[0].pages()[0];
  for (const StreamPages& s : chain) EXPECT_EQ(s.pages()[0], first);
  EXPECT_EQ(cache.pages().refcount(first), 4);
  // Page 1 (tokens 4-7) was partially filled in chain[0] and privatised by chain[1]; chain[1]'s
  // copy was full when chain[2] forked, so chain[2] and chain[3] share it.
  EXPECT_NE(chain[1].pages()[1], chain[0].pages()[1]);
  EXPECT_EQ(chain[2].pages()[1], chain[1].pages()[1]);
  EXPECT_EQ(chain[3].pages()[1], chain[1].pages()[1]);
  EXPECT_EQ(cache.pages().refcount(chain[1].pages()[1]), 3);
  // Now every stream appends: each must still read exactly its own tokens.
  for (size_t i = 0; i < chain.size(); ++i) ASSERT_TRUE(engine.extend(chain[i], seq(5000 + 100 * int(i), 5)));
  for (const StreamPages& s : chain) {
    EXPECT_EQ(engine.check_kv(s.tokens(), s.pages()), "");
    EXPECT_EQ(s.audit(), "");
  }
  expect_refs_accounted(cache, {&chain[0], &chain[1], &chain[2], &chain[3]});
  chain.clear();
  EXPECT_EQ(cache.pages().free_count(), cache.pages().size());
}

TEST(StreamPages, DetachAndResumeRestoreTheRecurrentStateByteForByte) {
  RadixCache cache(small_geometry(/*pages=*/32, /*snapshots=*/4));
  Engine engine(cache);
  const std::vector<int32_t> history = seq(7000, 8);
  std::vector<int> history_pages;
  std::vector<std::byte> state_at_8;
  {
    StreamPages a(cache);
    ASSERT_TRUE(engine.extend(a, history));
    ASSERT_TRUE(engine.capture(a));
    state_at_8 = engine.restore(*a.captured_snapshot());
    ASSERT_TRUE(engine.extend(a, seq(7100, 3)));  // decoding past the boundary changes the live state
    history_pages.assign(a.pages().begin(), a.pages().begin() + 2);
    EXPECT_EQ(a.detach(), 8);
    EXPECT_EQ(a.length(), 0);
  }
  // Other sessions come and go, filling and recycling every other snapshot slot.
  for (int i = 0; i < 6; ++i) {
    StreamPages o(cache);
    ASSERT_TRUE(engine.extend(o, seq(100 * i, 4)));
    ASSERT_TRUE(engine.capture(o));
    o.detach();
    cache.match(history);  // the detached session stays the most recent entry
  }
  EXPECT_EQ(cache.evict_snapshots(cache.cached_snapshots() - 1), cache.snapshots().size() - 1);
  EXPECT_EQ(cache.cached_snapshots(), 1);

  // The session's next turn resumes from the boundary at 8.
  std::vector<int32_t> next_turn = history;
  for (int32_t t : seq(7100, 3)) next_turn.push_back(t);
  for (int32_t t : seq(8000, 5)) next_turn.push_back(t);
  StreamPages b = StreamPages::resume(cache, next_turn);
  EXPECT_EQ(b.length(), 8);
  EXPECT_EQ(b.resumed_tokens(), 8);
  EXPECT_TRUE(std::equal(b.pages().begin(), b.pages().end(), history_pages.begin(), history_pages.end()));
  ASSERT_TRUE(b.restore_snapshot().has_value());
  EXPECT_EQ(engine.restore(*b.restore_snapshot()), state_at_8);  // byte for byte
  EXPECT_EQ(engine.check_kv(b.tokens(), b.pages()), "");
  ASSERT_TRUE(engine.extend(b, std::span<const int32_t>(next_turn).subspan(8)));
  EXPECT_EQ(engine.check_kv(b.tokens(), b.pages()), "");

  // Resuming leaves the last token to compute: a query that ends exactly on the boundary resumes
  // from nothing here (there is no snapshot at 4).
  StreamPages c = StreamPages::resume(cache, history);
  EXPECT_EQ(c.length(), 0);
  EXPECT_FALSE(c.restore_snapshot().has_value());
  expect_refs_accounted(cache, {&b, &c});
}

TEST(StreamPages, CachedEntriesAreNotEvictedWhileAStreamHoldsThem) {
  RadixCache cache(small_geometry(/*pages=*/16));
  Engine engine(cache);
  {
    StreamPages a(cache);
    ASSERT_TRUE(engine.extend(a, seq(0, 8)));
    ASSERT_TRUE(engine.capture(a));
    a.detach();
  }
  StreamPages b = StreamPages::resume(cache, seq(0, 9));
  ASSERT_EQ(b.length(), 8);
  EXPECT_EQ(cache.evict(INT_MAX), 0);
  EXPECT_EQ(cache.evict_snapshots(INT_MAX), 0);
  EXPECT_EQ(cache.match(seq(0, 9)).tokens, 8);
  b.release();
  EXPECT_EQ(cache.evict(INT_MAX), 2);
  EXPECT_EQ(cache.pages().free_count(), cache.pages().size());
}

TEST(StreamPages, PoolExhaustionFailsTheExtensionAtomicallyAndTheCallerCanWait) {
  RadixCache cache(small_geometry(/*pages=*/16, /*snapshots=*/4, /*max_context=*/32));
  Engine engine(cache);
  StreamPages a(cache), b(cache);
  ASSERT_TRUE(engine.extend(a, seq(0, 30)));   // 8 pages
  ASSERT_TRUE(engine.extend(b, seq(100, 26)));  // 7 pages; one left
  StreamPages f = b.fork();                      // shares b's half-filled boundary page
  const std::vector<int> before(f.pages().begin(), f.pages().end());
  // Needs a private boundary page and one new page: two, with one free and nothing evictable.
  EXPECT_FALSE(f.extend(seq(900, 4)).has_value());
  EXPECT_TRUE(std::equal(before.begin(), before.end(), f.pages().begin(), f.pages().end()));
  EXPECT_EQ(f.length(), 26);
  EXPECT_EQ(cache.pages().free_count(), 1);
  expect_refs_accounted(cache, {&a, &b, &f});
  // The request waits; once another stream finishes, the same extension goes through.
  a.release();
  std::optional<Extension> e = engine.extend(f, seq(900, 4));
  ASSERT_TRUE(e && e->copy);
  EXPECT_EQ(engine.check_kv(f.tokens(), f.pages()), "");
  EXPECT_EQ(engine.check_kv(b.tokens(), b.pages()), "");
}

TEST(StreamPages, ExtensionEvictsUnlockedEntriesUnderPressure) {
  RadixCache cache(small_geometry(/*pages=*/8, /*snapshots=*/4, /*max_context=*/32));
  Engine engine(cache);
  for (int i = 0; i < 2; ++i) {
    StreamPages s(cache);
    ASSERT_TRUE(engine.extend(s, seq(100 * i, 16)));
    ASSERT_TRUE(engine.capture(s));
    s.detach();
  }
  EXPECT_EQ(cache.cached_pages(), 8);
  EXPECT_EQ(cache.pages().free_count(), 0);
  cache.match(seq(0, 16));  // entry 0 is the most recently used
  StreamPages t(cache);
  ASSERT_TRUE(engine.extend(t, seq(5000, 4)));  // evicts entry 1 (LRU), not entry 0
  EXPECT_EQ(cache.match(seq(100, 16)).tokens, 0);
  EXPECT_EQ(cache.match(seq(0, 16)).tokens, 16);
}

TEST(StreamPages, PublishSharesAPrefixWithConcurrentRequests) {
  RadixCache cache(small_geometry());
  Engine engine(cache);
  const std::vector<int32_t> system_prompt = seq(40, 12);
  StreamPages a(cache);
  ASSERT_TRUE(engine.extend(a, system_prompt));
  ASSERT_TRUE(engine.capture(a));
  EXPECT_EQ(a.publish(), 12);
  ASSERT_TRUE(engine.extend(a, seq(300, 5)));  // a keeps decoding
  std::vector<int32_t> other = system_prompt;
  other.push_back(999);
  StreamPages b = StreamPages::resume(cache, other);
  EXPECT_EQ(b.length(), 12);
  EXPECT_TRUE(std::equal(b.pages().begin(), b.pages().end(), a.pages().begin(), a.pages().begin() + 3));
  EXPECT_TRUE(engine.snapshot_holds(*b.restore_snapshot(), system_prompt));
  // a's next capture must not overwrite the published snapshot.
  ASSERT_TRUE(engine.extend(a, seq(400, 3)));  // length 20
  ASSERT_TRUE(engine.capture(a));
  EXPECT_NE(*a.captured_snapshot(), *b.restore_snapshot());
  EXPECT_TRUE(engine.snapshot_holds(*b.restore_snapshot(), system_prompt));
  expect_refs_accounted(cache, {&a, &b});
}

TEST(StreamPages, ChunkedPrefillCapturesBoundariesBehindTheReservation) {
  RadixCache cache(small_geometry());
  Engine engine(cache);
  const std::vector<int32_t> prompt = seq(3000, 21);
  StreamPages s(cache);
  ASSERT_TRUE(engine.extend(s, prompt));  // all 6 pages reserved at admission
  EXPECT_EQ(s.pages().size(), 6u);
  // Prefill chunks of 8 tokens: the state is captured where each chunk ends.
  ASSERT_TRUE(engine.capture(s, 8));
  const int slot = *s.captured_snapshot();
  ASSERT_TRUE(engine.capture(s, 16));
  EXPECT_EQ(*s.captured_snapshot(), slot);  // held by no one else: reused in place
  EXPECT_EQ(s.captured_tokens(), 16);
  EXPECT_EQ(s.detach(), 16);
  StreamPages r = StreamPages::resume(cache, prompt);
  EXPECT_EQ(r.length(), 16);
  EXPECT_TRUE(engine.snapshot_holds(*r.restore_snapshot(), std::span<const int32_t>(prompt).first(16)));
}

// A speculative step (docs/speculative.md): pages reserved for a draft with placeholder tokens, the
// drafts written over them, the rejected ones taken back. The stream then extends as if they had
// never been, frees the pages it gave back, and caches exactly the tokens it kept.
TEST(StreamPages, ADraftsRejectedTokensAreTakenBack) {
  RadixCache cache(small_geometry());
  Engine engine(cache);
  StreamPages s(cache);
  ASSERT_TRUE(engine.extend(s, seq(500, 7)));  // pages 0-1, the second partly filled
  ASSERT_TRUE(engine.capture(s, 4));
  const int used = cache.pages().used_count();
  ASSERT_TRUE(engine.extend(s, std::vector<int32_t>(6, 7)));  // a draft of 6 past token 7: 13 tokens, 4 pages
  EXPECT_EQ(cache.pages().used_count(), used + 2);
  s.rewrite_tail(seq(900, 6));
  EXPECT_EQ(s.tokens()[7], 900);
  engine.rewrite(s, 7);
  s.truncate(9);  // two drafts accepted
  EXPECT_EQ(s.length(), 9);
  EXPECT_EQ(s.pages().size(), 3u);
  EXPECT_EQ(cache.pages().used_count(), used + 1);
  expect_refs_accounted(cache, {&s});
  EXPECT_EQ(s.audit(), "");
  ASSERT_TRUE(engine.extend(s, seq(950, 3)));  // on from the kept tokens: 500..506, 900, 901, 950..952
  EXPECT_EQ(s.tokens()[9], 950);
  EXPECT_EQ(engine.check_kv(s.tokens(), s.pages()), "");
  ASSERT_TRUE(engine.capture(s, 12));
  std::vector<int32_t> kept = seq(500, 7);
  for (int32_t t : {900, 901, 950, 951, 952}) kept.push_back(t);
  EXPECT_GT(s.detach(), 0);
  kept.push_back(1234);  // a request continuing the kept tokens resumes at 12, with their state
  StreamPages r = StreamPages::resume(cache, kept);
  ASSERT_EQ(r.length(), 12);
  EXPECT_TRUE(engine.snapshot_holds(*r.restore_snapshot(), std::span<const int32_t>(kept).first(12)));
  EXPECT_EQ(engine.check_kv(r.tokens(), r.pages()), "");
}

// ---------------------------------------------------------------------------------------------
// Randomized stress test. The reference model is the set of snapshot boundaries (token prefixes)
// the cache may hold: publishing adds one; the cache may drop any that no stream locks; it must
// never hold one that was not published. After every operation: every invariant audit, every pool
// reference accounted for, every stream and every cached prefix reading back its own tokens and
// states, and match() equal to the longest modelled prefix.

struct SimStream {
  StreamPages pages;
  std::vector<int32_t> locked;  // the prefix whose entry this stream locks; empty when none
};

class Stress {
 public:
  static constexpr size_t kMaxStreams = 6;

  // 6 streams of up to 12 pages share 56: the pool runs dry regularly.
  explicit Stress(uint32_t seed) : cache_(small_geometry(56, 10, 48)), engine_(cache_), rng_(seed) {}

  void run(int steps) {
    for (int step = 0; step < steps; ++step) {
      const int op = int(rng_() % 100);
      if (op < 20) admit();
      else if (op < 45) extend();
      else if (op < 57) capture();
      else if (op < 63) fork();
      else if (op < 70) publish();
      else if (op < 78) finish(/*detach=*/true);
      else if (op < 83) finish(/*detach=*/false);
      else if (op < 90) evict();
      else lookup();
      verify(step);
      if (::testing::Test::HasFatalFailure() || ::testing::Test::HasNonfatalFailure()) return;
    }
    while (!streams_.empty()) finish(bool(rng_() % 2));
    verify(steps);
    cache_.evict(INT_MAX);
    EXPECT_EQ(cache_.nodes(), 0);
    EXPECT_EQ(cache_.pages().free_count(), cache_.pages().size()) << "leaked pages";
    EXPECT_EQ(cache_.snapshots().free_count(), cache_.snapshots().size()) << "leaked snapshots";
    EXPECT_EQ(cache_.audit(), "");
  }

  std::map<std::string, int> counts;

 private:
  // Token sequences drawn so that requests share prefixes: a cached prefix, or a sequence seen
  // before cut at a random point, then fresh tokens.
  std::vector<int32_t> request() {
    std::vector<int32_t> t;
    const int from = int(rng_() % 4);
    if (from == 0 && !model_.empty()) {
      auto it = model_.begin();
      std::advance(it, rng_() % model_.size());
      t = *it;
    } else if (from != 3 && !known_.empty()) {
      const std::vector<int32_t>& base = known_[rng_() % known_.size()];
      t.assign(base.begin(), base.begin() + rng_() % (base.size() + 1));
    }
    const int extra = 1 + int(rng_() % 20);
    for (int i = 0; i < extra && int(t.size()) < max_context(); ++i) t.push_back(int32_t(rng_() % 1000));
    if (t.empty()) t.push_back(int32_t(rng_() % 1000));
    return t;
  }

  int max_context() const { return cache_.geometry().max_context; }

  std::vector<int32_t> fresh(int n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = int32_t(rng_() % 1000);
    return t;
  }

  size_t expected_match(std::span<const int32_t> q) const {
    size_t best = 0;
    for (const auto& p : model_)
      if (p.size() > best && p.size() <= q.size() && std::equal(p.begin(), p.end(), q.begin())) best = p.size();
    return best;
  }

  void admit() {
    if (streams_.size() >= kMaxStreams) return;
    std::vector<int32_t> q = request();
    const size_t want = expected_match(std::span<const int32_t>(q).first(q.size() - 1));
    StreamPages s = StreamPages::resume(cache_, q);
    ASSERT_EQ(size_t(s.length()), want);
    if (s.length() > 0) {
      ++counts["resume hits"];
      ASSERT_TRUE(engine_.snapshot_holds(*s.restore_snapshot(), s.tokens())) << "restored state differs";
      ASSERT_EQ(engine_.check_kv(s.tokens(), s.pages()), "");
    }
    std::vector<int32_t> locked(q.begin(), q.begin() + s.length());
    if (!engine_.extend(s, std::span<const int32_t>(q).subspan(s.length()))) {
      ++counts["admissions waiting"];  // pool exhausted: the request waits, holding nothing
      return;
    }
    known_.push_back(q);
    streams_.push_back({std::move(s), std::move(locked)});
  }

  SimStream* pick() { return streams_.empty() ? nullptr : &streams_[rng_() % streams_.size()]; }

  void extend() {
    SimStream* s = pick();
    if (!s) return;
    const int room = max_context() - s->pages.length();
    if (room == 0) return;
    const int n = 1 + int(rng_() % std::min(room, 9));
    const std::vector<int32_t> before(s->pages.pages().begin(), s->pages.pages().end());
    const int len = s->pages.length();
    const int copies = engine_.copies;
    if (!engine_.extend(s->pages, fresh(n))) {
      ++counts["extensions refused"];
      ASSERT_EQ(s->pages.length(), len);
      ASSERT_TRUE(std::equal(before.begin(), before.end(), s->pages.pages().begin(), s->pages.pages().end()));
      return;
    }
    counts["copies"] += engine_.copies - copies;
  }

  // Extends to the next page boundary and captures the state there.
  void capture() {
    SimStream* s = pick();
    if (!s) return;
    const int len = s->pages.length();
    const int n = len % kP ? kP - len % kP : kP;
    if (len + n > max_context()) return;
    if (!engine_.extend(s->pages, fresh(n))) return;
    // Usually at the end; sometimes at an earlier boundary, as a chunked prefill would.
    const int lo = s->pages.captured_tokens() / kP + 1, hi = s->pages.length() / kP;
    const int at = rng_() % 2 ? hi * kP : (lo + int(rng_() % (hi - lo + 1))) * kP;
    if (engine_.capture(s->pages, at)) ++counts["captures"];
    else ++counts["captures refused"];
  }

  void fork() {
    SimStream* s = pick();
    if (!s || streams_.size() >= kMaxStreams) return;
    SimStream f{s->pages.fork(), s->locked};
    streams_.push_back(std::move(f));
    ++counts["forks"];
  }

  void publish() {
    SimStream* s = pick();
    if (!s || !s->pages.captured_snapshot()) return;
    std::vector<int32_t> prefix(s->pages.tokens().begin(), s->pages.tokens().begin() + s->pages.captured_tokens());
    s->pages.publish();
    model_.insert(prefix);
    s->locked = prefix;
    ++counts["publishes"];
  }

  void finish(bool detach) {
    if (streams_.empty()) return;
    const size_t i = rng_() % streams_.size();
    StreamPages& s = streams_[i].pages;
    if (detach && s.captured_snapshot()) {
      model_.insert(std::vector<int32_t>(s.tokens().begin(), s.tokens().begin() + s.captured_tokens()));
      known_.push_back(std::vector<int32_t>(s.tokens().begin(), s.tokens().end()));
      ++counts["detaches"];
      s.detach();
    } else {
      s.release();
    }
    streams_.erase(streams_.begin() + i);
  }

  void evict() {
    if (rng_() % 2) counts["pages evicted"] += cache_.evict(1 + int(rng_() % 8));
    else counts["snapshots evicted"] += cache_.evict_snapshots(1 + int(rng_() % 3));
  }

  void lookup() {
    std::vector<int32_t> q = request();
    PrefixMatch m = cache_.match(q);
    ASSERT_EQ(size_t(m.tokens), expected_match(q));
    if (m.tokens > 0) {
      ASSERT_TRUE(engine_.snapshot_holds(*m.snapshot, std::span<const int32_t>(q).first(m.tokens)));
      ASSERT_EQ(engine_.check_kv(std::span<const int32_t>(q).first(m.tokens), m.pages), "");
    }
  }

  void verify(int step) {
    SCOPED_TRACE("step " + std::to_string(step));
    ASSERT_EQ(cache_.audit(), "");
    std::vector<const StreamPages*> held;
    for (const SimStream& s : streams_) {
      ASSERT_EQ(s.pages.audit(), "");
      ASSERT_EQ(engine_.check_kv(s.pages.tokens(), s.pages.pages()), "");
      if (std::optional<int> slot = s.pages.captured_snapshot()) {
        ASSERT_TRUE(engine_.snapshot_holds(*slot, s.pages.tokens().first(s.pages.captured_tokens())));
      }
      held.push_back(&s.pages);
    }
    expect_refs_accounted(cache_, held);
    // The tree holds only modelled prefixes, each reading back its own tokens and state.
    std::set<std::vector<int32_t>> cached;
    cache_.visit([&](const CachedPrefix& p) {
      ASSERT_EQ(engine_.check_kv(p.tokens, p.pages), "");
      if (!p.snapshot) return;
      std::vector<int32_t> prefix(p.tokens.begin(), p.tokens.end());
      ASSERT_TRUE(model_.count(prefix)) << "the cache holds a boundary never published";
      ASSERT_TRUE(engine_.snapshot_holds(*p.snapshot, p.tokens)) << "cached state differs";
      cached.insert(std::move(prefix));
    });
    for (const SimStream& s : streams_) {
      if (!s.locked.empty()) {
        ASSERT_TRUE(cached.count(s.locked)) << "a locked entry was evicted";
      }
    }
    // What was evicted is gone from the model too.
    model_ = std::move(cached);
  }

  RadixCache cache_;
  Engine engine_;
  std::mt19937 rng_;
  std::vector<SimStream> streams_;  // destroyed before cache_
  std::set<std::vector<int32_t>> model_;
  std::vector<std::vector<int32_t>> known_;
};

TEST(CacheStress, RandomOperationsAgainstAReferenceModelLeakNothing) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Stress stress(seed);
    stress.run(4000);
    // The run exercised what it claims to.
    for (const char* what : {"resume hits", "copies", "captures", "forks", "publishes", "detaches",
                             "extensions refused", "pages evicted", "snapshots evicted"})
      EXPECT_GT(stress.counts[what], 0) << what;
    std::string summary;
    for (const auto& [k, v] : stress.counts) summary += k + "=" + std::to_string(v) + " ";
    std::printf("seed %u: %s\n", seed, summary.c_str());
  }
}

}  // namespace
}  // namespace rocket
