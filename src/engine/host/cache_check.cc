// `rocket-engine cachecheck`: the prefix cache's exactness on the real engine (ctest e2e.cache_exactness).
//
//  1. Cached vs cold: a prompt sharing two pages with an earlier one, resumed from the cache (shared
//     KV pages + restored recurrent snapshot), gives bit-identical logits at the last prompt position
//     and over greedy decode steps to the same prompt computed cold.
//  2. Fork vs materialised copy: a forked stream (pages shared by refcount, its partially filled
//     boundary page privatised on extend) and a private stream holding a byte copy of the same KV
//     and state give bit-identical logits for the same next tokens, while the parent goes on with a
//     different token at the same positions in its own pages.
//  3. Negative control: the fork with one page-table entry pointed at the wrong page must differ.
// Exit 0 when all hold; prints one line per check.
#include "engine/host/cache_check.h"

#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "cache/radix_cache.h"
#include "cache/stream_pages.h"
#include "core/error.h"
#include "kernels/host/sample.h"

namespace rocket {

namespace {

using Logits = std::vector<float>;

class Harness {
 public:
  explicit Harness(HostEngine& e)
      : e_(e), geometry_(CacheGeometry::from_plan(e.plan(), e.plan().state_snapshots)), cache_(geometry_) {
    const std::optional<int> pad = cache_.alloc_page();
    CHECK(pad.has_value());
    pad_ = *pad;
    e_.bind_pages(HostEngine::kPadSlot, &pad_, 1);
  }
  ~Harness() { cache_.pages().release(pad_); }

  RadixCache& cache() { return cache_; }
  int page_tokens() const { return geometry_.page_tokens; }

  void bind(int slot, const StreamPages& s) { e_.bind_pages(slot, s.pages().data(), int(s.pages().size())); }

  // Reserves and prefills `tokens` after what `s` holds, capturing snapshots at page boundaries;
  // returns the last row's logits.
  Logits prefill(StreamPages& s, int slot, const std::vector<int32_t>& tokens) {
    const int start = s.length();
    std::optional<Extension> ext = s.extend(tokens);
    if (!ext) fail("cachecheck: the pool ran out of pages");
    if (ext->copy) e_.copy_page(ext->copy->src, ext->copy->dst, ext->copy->tokens);
    bind(slot, s);
    const int chunk = e_.plan().prefill_chunk;
    for (int at = 0; at < int(tokens.size()); at += chunk) {
      const int n = std::min<int>(chunk, int(tokens.size()) - at);
      const bool last = at + n == int(tokens.size());
      e_.prefill(slot, tokens.data() + at, n, start + at, last ? n - 1 : n);
      const int boundary = start + at + n;
      if (boundary % page_tokens() == 0 && boundary > s.captured_tokens())
        if (std::optional<int> snap = s.capture_snapshot(boundary)) e_.capture_state(slot, *snap);
      if (last) return Logits(e_.logits(n - 1), e_.logits(n - 1) + engine::kVocab);
    }
    fail("cachecheck: empty prefill");
  }

  // One decode step of several streams at once; returns each row's logits. `tamper` runs after the
  // page tables are bound, before the step.
  std::vector<Logits> decode(std::vector<StreamPages*> streams, const std::vector<int>& slots,
                             const std::vector<int32_t>& ids, const std::function<void()>& tamper = {}) {
    const int n = int(streams.size());
    std::vector<int64_t> pos(streams.size());
    for (int i = 0; i < n; ++i) {
      pos[size_t(i)] = streams[size_t(i)]->length();
      std::optional<Extension> ext = streams[size_t(i)]->extend(std::span<const int32_t>(&ids[size_t(i)], 1));
      if (!ext) fail("cachecheck: the pool ran out of pages");
      if (ext->copy) e_.copy_page(ext->copy->src, ext->copy->dst, ext->copy->tokens);
      bind(slots[size_t(i)], *streams[size_t(i)]);
    }
    if (tamper) tamper();
    e_.decode(n, ids.data(), slots.data(), pos.data());
    std::vector<Logits> out;
    for (int i = 0; i < n; ++i) out.emplace_back(e_.logits(i), e_.logits(i) + engine::kVocab);
    return out;
  }

 private:
  HostEngine& e_;
  CacheGeometry geometry_;
  RadixCache cache_;
  int pad_ = -1;
};

bool same(const Logits& a, const Logits& b) { return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0; }

std::vector<int32_t> random_tokens(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int32_t> d(0, int32_t(engine::kVocab) - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

int32_t greedy(const Logits& l) { return host::argmax(l.data(), int(l.size())); }

int report(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  return ok ? 0 : 1;
}

}  // namespace

int cmd_cache_check(HostEngine& e) {
  Harness h(e);
  const int P = h.page_tokens();
  constexpr int kSteps = 6;
  std::mt19937 rng(20261129);
  int failures = 0;

  // 1. Cached vs cold.
  const std::vector<int32_t> first = random_tokens(rng, 2 * P + P / 2);
  std::vector<int32_t> second(first.begin(), first.begin() + 2 * P);
  for (int32_t t : random_tokens(rng, P / 3)) second.push_back(t);

  std::vector<Logits> cold;
  {
    StreamPages s(h.cache());
    e.reset_slot(0);
    cold.push_back(h.prefill(s, 0, second));
    for (int i = 0; i < kSteps; ++i) cold.push_back(h.decode({&s}, {0}, {greedy(cold.back())})[0]);
    s.release();  // computed without the cache: leave nothing in it
  }
  {
    StreamPages s(h.cache());
    e.reset_slot(1);
    h.prefill(s, 1, first);
    s.detach();  // caches the first prompt up to its last page boundary (2 pages)
  }
  std::vector<Logits> warm;
  int resumed = 0;
  {
    StreamPages s = StreamPages::resume(h.cache(), second);
    resumed = s.resumed_tokens();
    if (s.restore_snapshot()) e.restore_state(*s.restore_snapshot(), 2);
    else e.reset_slot(2);
    warm.push_back(h.prefill(s, 2, std::vector<int32_t>(second.begin() + resumed, second.end())));
    for (int i = 0; i < kSteps; ++i) warm.push_back(h.decode({&s}, {2}, {greedy(warm.back())})[0]);
    s.detach();
  }
  std::printf("     cached prefix: %d of %zu prompt tokens resumed from the cache\n", resumed, second.size());
  failures += report(resumed == 2 * P, "the second prompt resumes from the shared two-page boundary");
  bool exact = cold.size() == warm.size();
  for (size_t i = 0; exact && i < cold.size(); ++i) exact = same(cold[i], warm[i]);
  failures += report(exact, "cached-prefix logits (last prompt position + greedy steps) equal cold, bit for bit");

  // 2. Fork vs materialised private copy, from a stream ending mid-page.
  const std::vector<int32_t> base = random_tokens(rng, P + P / 3);
  StreamPages parent(h.cache());
  e.reset_slot(3);
  h.prefill(parent, 3, base);
  StreamPages fork = parent.fork();
  e.copy_state(3, 4);
  StreamPages copy(h.cache());  // same sequence, private pages holding a byte copy
  {
    std::optional<Extension> ext = copy.extend(base);
    if (!ext) fail("cachecheck: the pool ran out of pages");
    for (size_t j = 0; j < copy.pages().size(); ++j) e.copy_page(parent.pages()[j], copy.pages()[j], P);
    e.copy_state(3, 5);
  }
  const std::vector<int32_t> next = random_tokens(rng, 2 * kSteps);
  bool fork_exact = true;
  for (int i = 0; i < kSteps; ++i) {
    // The parent writes a different token at the same position, into its own boundary page.
    std::vector<Logits> out =
        h.decode({&parent, &fork, &copy}, {3, 4, 5}, {next[size_t(kSteps + i)], next[size_t(i)], next[size_t(i)]});
    fork_exact = fork_exact && same(out[1], out[2]) && !same(out[0], out[1]);
  }
  failures += report(fork_exact, "forked stream equals its materialised private copy; the parent's writes stay its own");

  // 3. Negative control: the fork reading one wrong page must not match.
  const int32_t probe = next[0];
  std::vector<Logits> neg = h.decode({&fork, &copy}, {4, 5}, {probe, probe}, [&] {
    std::vector<int> wrong(fork.pages().begin(), fork.pages().end());
    wrong[0] = copy.pages()[1];  // a page of the same stream's data, at the wrong place
    e.bind_pages(4, wrong.data(), int(wrong.size()));
  });
  failures += report(!same(neg[0], neg[1]), "negative control: a corrupted page-table entry changes the logits");
  parent.release();
  fork.release();
  copy.release();

  const std::string audit = h.cache().audit();
  failures += report(audit.empty(), audit.empty() ? "cache invariants hold afterwards" : audit.c_str());
  std::printf("%s\n", failures ? "cachecheck FAILED" : "cachecheck passed");
  return failures ? 1 : 0;
}

}  // namespace rocket
