// RadixCache: the token-exact prefix cache. A radix tree over token ids at page granularity whose
// entries hold, for a prefix, the KV pages of every full-attention layer and, at the entry's end, a
// snapshot of every linear-attention layer's conv + recurrent state: one cache entry restores a
// sequence atomically at a shared token boundary (docs/doctrine.md, reusable state).
//
// Locking contract: a node locked by a stream, and every ancestor of it, is neither evicted nor
// stripped of its snapshot until the stream unlocks it; everything else may be evicted, least
// recently used first.
//
// Thread safety: none. The engine loop thread owns the cache, its pools and every StreamPages.
//
// Structure. Every edge covers whole pages (page_tokens tokens each): the full page is the sharable
// unit, so matches are page-aligned. Siblings differ in their first page (the child key). A node
// holds one page index per page of its edge and optionally a snapshot slot for the boundary at its
// END. A resumable point needs both the KV of every token before it and the recurrent state exactly
// at it, so match() answers the deepest node with a snapshot. The cache holds one pool reference on
// each page and snapshot it stores; streams hold their own.
//
// Invariants (audit()):
//  - a node's edge is pages × page_tokens tokens, at least one page; its key in the parent is its
//    first page; its end (tokens from the root) is the parent's end plus its edge, <= max_context;
//  - a page index or snapshot slot appears at most once in the tree and is in use in its pool;
//  - every leaf has a snapshot (a snapshot-less leaf could never be resumed: it is pruned);
//  - lock(n) >= Σ lock(children) (lock() counts on the node and each ancestor);
//  - last_access(parent) >= last_access(child) (touches run from the root down);
//  - the node, page and snapshot counts agree with the tree; both pools pass their own audit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/geometry.h"
#include "cache/page_pool.h"

namespace rocket {

struct CacheNode;  // opaque; a handle stays valid while locked

struct PrefixMatch {
  int tokens = 0;               // resumable prefix length: a multiple of page_tokens, 0 for none
  std::vector<int> pages;       // tokens / page_tokens pages, in order
  std::optional<int> snapshot;  // the state exactly at `tokens`; set iff tokens > 0
  CacheNode* node = nullptr;    // what to lock (the root when tokens == 0)
};

struct Insertion {
  CacheNode* node = nullptr;    // the node ending at the inserted boundary
  int new_pages = 0;            // pages the cache took a reference on (not already cached)
  bool snapshot_adopted = false;  // false: the boundary already had a snapshot, the caller's is unused
};

// One node as visit() shows it: the whole prefix from the root to the node's end.
struct CachedPrefix {
  std::span<const int32_t> tokens;
  std::span<const int> pages;
  std::optional<int> snapshot;
  int lock = 0;
  uint64_t last_access = 0;
};

class RadixCache {
 public:
  explicit RadixCache(const CacheGeometry& geometry);  // Error on an inconsistent geometry
  // REQUIRES: every stream released (no locks, no pages or snapshots held outside the tree).
  ~RadixCache();
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  const CacheGeometry& geometry() const { return geometry_; }
  PagePool& pages() { return pages_; }
  PagePool& snapshots() { return snapshots_; }
  const PagePool& pages() const { return pages_; }
  const PagePool& snapshots() const { return snapshots_; }

  // The deepest node ending on a page boundary of `tokens` that has a snapshot. Marks the path to
  // it used. Takes no references: lock the node before anything else can evict.
  PrefixMatch match(std::span<const int32_t> tokens);
  // What match() would resume from (its `tokens`), without marking anything used: a replica's
  // report to the replicated front (scheduler.h, report_prefix) must not reorder eviction for a
  // request that may be routed elsewhere.
  int resumable_prefix(std::span<const int32_t> tokens) const;
  // The longest page-aligned prefix of `tokens` whose pages the tree holds, snapshot or not. Where
  // it exceeds match(), a request shares a branch point with cached sequences that nothing can
  // resume from: the boundary worth capturing a snapshot at. Changes nothing (no touch).
  int cached_prefix(std::span<const int32_t> tokens) const;
  // REQUIRES: node from match() or insert(), still in the tree (locked, or no eviction since).
  void lock(CacheNode* node);
  // REQUIRES: a matching lock(node).
  void unlock(CacheNode* node);

  // Caches `tokens` (whole pages) with their pages and the snapshot at their end. Parts already
  // cached keep their existing pages (the caller's duplicates stay the caller's); a boundary that
  // already has a snapshot keeps it. Takes its own references on what it adopts; the caller's
  // references are untouched. Splits an edge when the new boundary falls inside it.
  // REQUIRES: tokens.size() a positive multiple of page_tokens, <= max_context;
  //           pages.size() == tokens.size() / page_tokens; every page and the snapshot in use.
  Insertion insert(std::span<const int32_t> tokens, std::span<const int> pages, int snapshot);

  // Evicts unlocked leaves, least recently used first (and any ancestor left as a snapshot-less
  // leaf), until n_pages pages have returned to the pool or nothing unlocked is left. Returns the
  // pages returned to the pool (a page a stream still holds is dropped by the tree but not freed).
  // NOTE: gathers the candidates afresh, O(nodes) per call; nodes <= pages, and eviction runs only
  // under pressure, so no ordered index is kept in step with every touch.
  int evict(int n_pages);
  // Drops snapshots of unlocked nodes, least recently used first, until n slots have returned to
  // the pool or none is left; a leaf losing its snapshot is evicted whole. Returns slots freed.
  int evict_snapshots(int n);
  // A page (refcount 1) from the pool, evicting LRU leaves when it is exhausted; nullopt when
  // nothing evictable frees one (every page is held by a stream or a locked node): wait or refuse.
  std::optional<int> alloc_page();
  // A snapshot slot (refcount 1), evicting LRU snapshots when none is free; nullopt as above.
  std::optional<int> alloc_snapshot();

  int nodes() const { return nodes_; }  // excluding the root
  int cached_pages() const { return cached_pages_; }
  int cached_snapshots() const { return cached_snapshots_; }

  // Every node but the root, depth first, children in key order.
  void visit(const std::function<void(const CachedPrefix&)>& fn) const;
  // Adds the tree's references: ++page_refs[p] per cached page, ++snapshot_refs[s] per snapshot.
  // REQUIRES: the vectors sized to the pools.
  void add_refs(std::vector<int>& page_refs, std::vector<int>& snapshot_refs) const;
  // The first broken invariant, described; empty when all hold. O(nodes + pool size).
  std::string audit() const;
  void check_invariants() const;  // CHECK-fails on audit()

 private:
  CacheNode* split(CacheNode* node, int keep_pages);
  void touch(CacheNode* node);
  // The walk match() and resumable_prefix() share: the deepest node with a snapshot ending on a page
  // boundary of `tokens`, the root when none.
  CacheNode* deepest_resumable(std::span<const int32_t> tokens) const;
  int remove_leaf(CacheNode* node);  // returns pages freed
  // After a removal: evicts `node` and its ancestors while each is an unlocked snapshot-less leaf,
  // adding the pages freed to *freed. Returns the first node kept (possibly the root).
  CacheNode* prune(CacheNode* node, int* freed);

  CacheGeometry geometry_;
  PagePool pages_, snapshots_;
  std::unique_ptr<CacheNode> root_;
  uint64_t clock_ = 0, serial_ = 0;
  int nodes_ = 0, cached_pages_ = 0, cached_snapshots_ = 0;
  int64_t locks_ = 0;
};

}  // namespace rocket
