// StreamPages: one active stream's page table and its claims on the prefix cache.
//
// A stream holds one pool reference on every page of its table, one on its last captured
// snapshot, and a lock on the cache node it resumed from or last published (so that entry, its
// pages and its snapshot stay while the stream runs). Full pages are immutable and shared freely.
// Only the last, partially filled page is ever written, and a stream never writes a page another
// holder can see: extend() first privatises a shared boundary page (copy-on-extend), only that one,
// and reports the copy for the engine to perform before it writes.
//
// Thread safety: none; the engine loop thread owns every stream and the cache.
// Invariants (audit()): pages().size() == pages_for(length()) with no index twice, each in use; a
// captured snapshot is in use and sits at a page boundary in (0, length()].
// Lifetime: released by detach(), release() or destruction, always before its RadixCache dies.
// Copy is deleted (a copy would double-release); fork() is the explicit share.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/radix_cache.h"

namespace rocket {

// Copy the first `tokens` token rows of cache page src into cache page dst, for every
// full-attention layer's K and V (KvLayout, cache/layout.h), before writing dst.
struct PageCopy {
  int src = -1, dst = -1, tokens = 0;
};

struct Extension {
  std::optional<PageCopy> copy;  // the shared boundary page was replaced by a private copy
  int first_page = 0;            // table index of the first page the new tokens are written to
};

class StreamPages {
 public:
  // An empty stream (nothing cached to start from).
  explicit StreamPages(RadixCache& cache);
  // Admission from the cache: forks the deepest cached boundary of `tokens`, leaving at least the
  // last token to compute (its logits are what the engine needs next). The stream starts at
  // length() == that boundary, holding its pages and a lock on its entry; the engine restores the
  // state from restore_snapshot() into the stream's slot and then extends with the rest.
  static StreamPages resume(RadixCache& cache, std::span<const int32_t> tokens);
  StreamPages(StreamPages&& other) noexcept;
  StreamPages& operator=(StreamPages&& other) noexcept;
  StreamPages(const StreamPages&) = delete;
  StreamPages& operator=(const StreamPages&) = delete;
  ~StreamPages();

  // A second stream sharing everything this one holds (pages, snapshot, lock): refcounts only, no
  // bytes move. The engine copies this stream's live conv + recurrent state to the fork's slot.
  // REQUIRES (of the engine): every token of this stream computed, so shared pages are final.
  StreamPages fork();

  // Appends tokens (reserving their pages; the engine computes them afterwards, in chunks if it
  // likes): new pages as needed and, when the boundary page is partially filled and shared, a
  // private copy of it. Atomic for the stream: nullopt when the pool cannot supply the pages even
  // after evicting (the stream is unchanged, though entries may have been evicted trying; the caller
  // waits or refuses the request).
  // REQUIRES: length() + tokens.size() <= max_context.
  std::optional<Extension> extend(std::span<const int32_t> tokens);

  // The last tokens.size() tokens extend() added become `tokens` (a speculative step reserves its
  // draft's pages before the drafts exist). REQUIRES: none of them captured.
  void rewrite_tail(std::span<const int32_t> tokens);
  // Takes back the tokens past `length` that extend() reserved (a speculative step's rejected drafts):
  // pages past the last one `length` needs go back to the pool. They were never computed into a
  // snapshot or published, and were private to the stream.
  // REQUIRES: max(captured_tokens(), resumed_tokens()) <= length <= length().
  void truncate(int length);

  // A slot for the engine to copy the stream's state at token boundary `at` into (the engine has
  // computed tokens [0, at) and holds the state exactly there), recorded as this stream's latest
  // snapshot. Reuses the last captured slot when no one else holds it; otherwise takes a new one
  // (evicting LRU snapshots). nullopt when none can be had: caching just misses this boundary.
  // `at` may lag length() when extend() reserved pages ahead of a chunked prefill.
  // REQUIRES: at a positive multiple of page_tokens, captured_tokens() < at <= length().
  std::optional<int> capture_snapshot(int at);
  // Caches the prefix up to the last captured snapshot (pages + snapshot) and moves the stream's
  // lock onto that entry; the stream keeps running. Returns the tokens newly cached (pages the
  // cache did not hold × page_tokens); 0 when nothing was captured.
  int publish();
  // The stream leaves: publish(), then release(). Returns what publish() returned.
  int detach();
  // Drops every page, snapshot and lock; the stream is empty afterwards. Idempotent.
  void release();

  int length() const { return int(tokens_.size()); }
  std::span<const int32_t> tokens() const { return tokens_; }
  std::span<const int> pages() const { return pages_; }
  // The state to restore after resume(); valid until publish() (the resumed entry's lock keeps it).
  std::optional<int> restore_snapshot() const { return restore_; }
  int resumed_tokens() const { return resumed_tokens_; }
  std::optional<int> captured_snapshot() const {
    return captured_ >= 0 ? std::optional<int>(captured_) : std::nullopt;
  }
  int captured_tokens() const { return captured_tokens_; }

  // Adds this stream's references, as RadixCache::add_refs does.
  void add_refs(std::vector<int>& page_refs, std::vector<int>& snapshot_refs) const;
  // The first broken invariant, described; empty when all hold.
  std::string audit() const;

 private:
  RadixCache* cache_;
  std::vector<int32_t> tokens_;
  std::vector<int> pages_;
  CacheNode* node_ = nullptr;     // locked entry, or null
  std::optional<int> restore_;
  int resumed_tokens_ = 0;
  int captured_ = -1, captured_tokens_ = 0;
};

}  // namespace rocket
