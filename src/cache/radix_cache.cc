#include "cache/radix_cache.h"

#include <algorithm>
#include <map>
#include <queue>

#include <fmt/format.h>

#include "core/error.h"

namespace rocket {

// Orders child keys (a first page of tokens) and lets a span of the query look them up unbuilt. Not in
// an anonymous namespace: CacheNode (declared in the header) holds a map ordered by it.
struct PageKeyLess {
  using is_transparent = void;
  bool operator()(std::span<const int32_t> a, std::span<const int32_t> b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
};

struct CacheNode {
  CacheNode* parent = nullptr;
  std::vector<int32_t> tokens;  // the edge: pages.size() × page_tokens tokens
  std::vector<int> pages;
  int snapshot = -1;            // state at this node's end; -1 = none
  int lock = 0;                 // streams locking this node or a descendant
  uint64_t last_access = 0;
  uint64_t serial = 0;          // creation order: breaks LRU ties deterministically
  int end = 0;                  // tokens from the root to the end of this edge
  std::map<std::vector<int32_t>, std::unique_ptr<CacheNode>, PageKeyLess> children;
};

namespace {

// Leading whole pages on which `edge` and `rest` agree.
int common_pages(std::span<const int32_t> edge, std::span<const int32_t> rest, int page_tokens) {
  const size_t limit = std::min(edge.size(), rest.size()) / page_tokens;
  size_t k = 0;
  while (k < limit && std::equal(edge.begin() + k * page_tokens, edge.begin() + (k + 1) * page_tokens,
                                 rest.begin() + k * page_tokens))
    ++k;
  return int(k);
}

using LruEntry = std::pair<std::pair<uint64_t, uint64_t>, CacheNode*>;  // ((last_access, serial), node)
using LruHeap = std::priority_queue<LruEntry, std::vector<LruEntry>, std::greater<>>;

LruEntry lru_entry(CacheNode* n) { return {{n->last_access, n->serial}, n}; }

template <typename Fn>
void for_each_node(CacheNode* root, Fn&& fn) {
  std::vector<CacheNode*> stack{root};
  while (!stack.empty()) {
    CacheNode* n = stack.back();
    stack.pop_back();
    if (n != root) fn(n);
    for (auto& [key, child] : n->children) stack.push_back(child.get());
  }
}

}  // namespace

RadixCache::RadixCache(const CacheGeometry& geometry)
    : geometry_((geometry.validate(), geometry)),
      pages_(geometry.pages),
      snapshots_(geometry.snapshot_slots),
      root_(std::make_unique<CacheNode>()) {}

RadixCache::~RadixCache() {
  CHECK(locks_ == 0, "cache destroyed while a stream still holds a lock");
  CHECK(pages_.used_count() == cached_pages_ && snapshots_.used_count() == cached_snapshots_,
        "cache destroyed while a stream still holds pages or snapshots");
}

void RadixCache::touch(CacheNode* node) {
  ++clock_;
  for (CacheNode* n = node; n != root_.get(); n = n->parent) n->last_access = clock_;
}

CacheNode* RadixCache::deepest_resumable(std::span<const int32_t> tokens) const {
  const size_t P = geometry_.page_tokens;
  CacheNode* cur = root_.get();
  CacheNode* best = cur;
  size_t at = 0;
  while (tokens.size() - at >= P) {
    auto it = cur->children.find(tokens.subspan(at, P));
    if (it == cur->children.end()) break;
    CacheNode* child = it->second.get();
    // NOTE: a boundary inside an edge has no snapshot, so a partial edge match resumes nothing.
    if (size_t(common_pages(child->tokens, tokens.subspan(at), int(P))) < child->pages.size()) break;
    at += child->tokens.size();
    cur = child;
    if (child->snapshot >= 0) best = child;
  }
  return best;
}

int RadixCache::resumable_prefix(std::span<const int32_t> tokens) const { return deepest_resumable(tokens)->end; }

PrefixMatch RadixCache::match(std::span<const int32_t> tokens) {
  const size_t P = geometry_.page_tokens;
  CacheNode* best = deepest_resumable(tokens);
  PrefixMatch m;
  m.node = best;
  m.tokens = best->end;
  if (best == root_.get()) return m;
  touch(best);
  m.snapshot = best->snapshot;
  std::vector<const CacheNode*> path;
  for (const CacheNode* n = best; n != root_.get(); n = n->parent) path.push_back(n);
  m.pages.reserve(m.tokens / P);
  for (auto n = path.rbegin(); n != path.rend(); ++n) m.pages.insert(m.pages.end(), (*n)->pages.begin(), (*n)->pages.end());
  return m;
}

int RadixCache::cached_prefix(std::span<const int32_t> tokens) const {
  const size_t P = geometry_.page_tokens;
  const CacheNode* cur = root_.get();
  size_t at = 0;
  while (tokens.size() - at >= P) {
    auto it = cur->children.find(tokens.subspan(at, P));
    if (it == cur->children.end()) break;
    const CacheNode* child = it->second.get();
    const size_t common = size_t(common_pages(child->tokens, tokens.subspan(at), int(P)));
    at += common * P;
    if (common < child->pages.size()) break;
    cur = child;
  }
  return int(at);
}

void RadixCache::lock(CacheNode* node) {
  CHECK(node != nullptr, "lock of a null node");
  ++locks_;
  for (CacheNode* n = node; n != root_.get(); n = n->parent) ++n->lock;
}

void RadixCache::unlock(CacheNode* node) {
  CHECK(node != nullptr && locks_ > 0, "unlock without a lock");
  --locks_;
  for (CacheNode* n = node; n != root_.get(); n = n->parent) {
    CHECK(n->lock > 0, "unlock of an unlocked node");
    --n->lock;
  }
}

CacheNode* RadixCache::split(CacheNode* node, int keep_pages) {
  const int P = geometry_.page_tokens;
  CacheNode* parent = node->parent;
  auto mid = std::make_unique<CacheNode>();
  mid->parent = parent;
  mid->tokens.assign(node->tokens.begin(), node->tokens.begin() + keep_pages * P);
  mid->pages.assign(node->pages.begin(), node->pages.begin() + keep_pages);
  // The upper half is on the path of everything that locked or touched the node.
  mid->lock = node->lock;
  mid->last_access = node->last_access;
  mid->serial = ++serial_;
  mid->end = parent->end + keep_pages * P;
  node->tokens.erase(node->tokens.begin(), node->tokens.begin() + keep_pages * P);
  node->pages.erase(node->pages.begin(), node->pages.begin() + keep_pages);
  auto slot = parent->children.find(std::span<const int32_t>(mid->tokens).first(P));
  CHECK(slot != parent->children.end() && slot->second.get() == node, "split of a node not under its parent");
  std::unique_ptr<CacheNode> owned = std::move(slot->second);
  node->parent = mid.get();
  mid->children.emplace(std::vector<int32_t>(node->tokens.begin(), node->tokens.begin() + P), std::move(owned));
  CacheNode* m = mid.get();
  slot->second = std::move(mid);
  ++nodes_;
  return m;
}

Insertion RadixCache::insert(std::span<const int32_t> tokens, std::span<const int> pages, int snapshot) {
  const size_t P = geometry_.page_tokens;
  CHECK(!tokens.empty() && tokens.size() % P == 0 && tokens.size() <= size_t(geometry_.max_context),
        "insert needs a positive whole number of pages within max_context");
  CHECK(pages.size() == tokens.size() / P, "insert needs one page per page of tokens");
  CHECK(snapshots_.refcount(snapshot) >= 1, "insert of a snapshot slot not in use");
  Insertion r;
  CacheNode* cur = root_.get();
  size_t at = 0;
  while (at < tokens.size()) {
    std::span<const int32_t> rest = tokens.subspan(at);
    auto it = cur->children.find(rest.first(P));
    if (it == cur->children.end()) {
      auto leaf = std::make_unique<CacheNode>();
      leaf->parent = cur;
      leaf->tokens.assign(rest.begin(), rest.end());
      leaf->pages.assign(pages.begin() + at / P, pages.end());
      leaf->serial = ++serial_;
      leaf->end = cur->end + int(rest.size());
      for (int p : leaf->pages) pages_.retain(p);
      r.new_pages = int(leaf->pages.size());
      cached_pages_ += r.new_pages;
      ++nodes_;
      CacheNode* l = leaf.get();
      cur->children.emplace(std::vector<int32_t>(rest.begin(), rest.begin() + P), std::move(leaf));
      cur = l;
      break;
    }
    CacheNode* child = it->second.get();
    const int k = common_pages(child->tokens, rest, int(P));
    if (size_t(k) < child->pages.size()) child = split(child, k);
    cur = child;
    at += k * P;
  }
  if (cur->snapshot < 0) {
    snapshots_.retain(snapshot);
    cur->snapshot = snapshot;
    ++cached_snapshots_;
    r.snapshot_adopted = true;
  }
  touch(cur);
  r.node = cur;
  return r;
}

int RadixCache::remove_leaf(CacheNode* node) {
  CHECK(node != root_.get() && node->children.empty() && node->lock == 0, "removal of a locked or inner node");
  int freed = 0;
  for (int p : node->pages) freed += pages_.release(p);
  cached_pages_ -= int(node->pages.size());
  if (node->snapshot >= 0) {
    snapshots_.release(node->snapshot);
    --cached_snapshots_;
  }
  CacheNode* parent = node->parent;
  auto it = parent->children.find(std::span<const int32_t>(node->tokens).first(geometry_.page_tokens));
  CHECK(it != parent->children.end() && it->second.get() == node, "leaf not under its parent");
  parent->children.erase(it);  // destroys the node
  --nodes_;
  return freed;
}

CacheNode* RadixCache::prune(CacheNode* node, int* freed) {
  while (node != root_.get() && node->children.empty() && node->lock == 0 && node->snapshot < 0) {
    CacheNode* parent = node->parent;
    *freed += remove_leaf(node);
    node = parent;
  }
  return node;
}

int RadixCache::evict(int n_pages) {
  LruHeap heap;
  for_each_node(root_.get(), [&](CacheNode* n) {
    if (n->children.empty() && n->lock == 0) heap.push(lru_entry(n));
  });
  int freed = 0;
  while (freed < n_pages && !heap.empty()) {
    CacheNode* leaf = heap.top().second;
    heap.pop();
    CacheNode* parent = leaf->parent;
    freed += remove_leaf(leaf);
    // An ancestor left a leaf with its snapshot is a candidate in its own right.
    CacheNode* survivor = prune(parent, &freed);
    if (survivor != root_.get() && survivor->children.empty() && survivor->lock == 0) heap.push(lru_entry(survivor));
  }
  return freed;
}

int RadixCache::evict_snapshots(int n) {
  LruHeap heap;
  for_each_node(root_.get(), [&](CacheNode* x) {
    if (x->snapshot >= 0 && x->lock == 0) heap.push(lru_entry(x));
  });
  int freed = 0;
  while (freed < n && !heap.empty()) {
    CacheNode* node = heap.top().second;
    heap.pop();
    if (node->children.empty()) {
      // Without its snapshot a leaf can never be resumed: evict it whole.
      const int slot = node->snapshot;
      const bool last = snapshots_.refcount(slot) == 1;
      CacheNode* parent = node->parent;
      int pages_freed = remove_leaf(node);
      freed += last;
      // An ancestor left a leaf keeps its snapshot and is already a candidate when unlocked.
      prune(parent, &pages_freed);
    } else {
      freed += snapshots_.release(node->snapshot);
      node->snapshot = -1;
      --cached_snapshots_;
    }
  }
  return freed;
}

std::optional<int> RadixCache::alloc_page() {
  if (auto p = pages_.alloc()) return p;
  evict(1);
  return pages_.alloc();
}

std::optional<int> RadixCache::alloc_snapshot() {
  if (auto s = snapshots_.alloc()) return s;
  evict_snapshots(1);
  return snapshots_.alloc();
}

void RadixCache::visit(const std::function<void(const CachedPrefix&)>& fn) const {
  std::vector<int32_t> tokens;
  std::vector<int> pages;
  // Iterative DFS keeping the path's tokens and pages; (node, next child) frames.
  struct Frame {
    const CacheNode* node;
    decltype(CacheNode::children)::const_iterator next;
  };
  std::vector<Frame> stack{{root_.get(), root_->children.begin()}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next == f.node->children.end()) {
      tokens.resize(tokens.size() - f.node->tokens.size());
      pages.resize(pages.size() - f.node->pages.size());
      stack.pop_back();
      continue;
    }
    const CacheNode* c = (f.next++)->second.get();
    tokens.insert(tokens.end(), c->tokens.begin(), c->tokens.end());
    pages.insert(pages.end(), c->pages.begin(), c->pages.end());
    fn(CachedPrefix{.tokens = tokens,
                    .pages = pages,
                    .snapshot = c->snapshot >= 0 ? std::optional<int>(c->snapshot) : std::nullopt,
                    .lock = c->lock,
                    .last_access = c->last_access});
    stack.push_back({c, c->children.begin()});
  }
}

void RadixCache::add_refs(std::vector<int>& page_refs, std::vector<int>& snapshot_refs) const {
  CHECK(page_refs.size() == size_t(pages_.size()) && snapshot_refs.size() == size_t(snapshots_.size()),
        "ref vectors must be sized to the pools");
  for_each_node(root_.get(), [&](CacheNode* n) {
    for (int p : n->pages) ++page_refs[p];
    if (n->snapshot >= 0) ++snapshot_refs[n->snapshot];
  });
}

std::string RadixCache::audit() const {
  if (std::string broken = pages_.audit(); !broken.empty()) return "page pool: " + broken;
  if (std::string broken = snapshots_.audit(); !broken.empty()) return "snapshot pool: " + broken;
  const CacheNode* root = root_.get();
  if (!root->tokens.empty() || !root->pages.empty() || root->snapshot >= 0 || root->lock != 0 || root->end != 0)
    return "the root holds tokens, pages, a snapshot or a lock";
  const size_t P = geometry_.page_tokens;
  std::vector<uint8_t> page_seen(pages_.size(), 0), slot_seen(snapshots_.size(), 0);
  int nodes = 0, pages = 0, snapshots = 0;
  std::string broken;
  for_each_node(root_.get(), [&](CacheNode* n) {
    if (!broken.empty()) return;
    const CacheNode* parent = n->parent;
    const std::string where = fmt::format("node ending at token {}", n->end);
    ++nodes;
    if (n->pages.empty() || n->tokens.size() != n->pages.size() * P) {
      broken = fmt::format("{}: edge of {} tokens for {} pages", where, n->tokens.size(), n->pages.size());
      return;
    }
    auto key = parent->children.find(std::span<const int32_t>(n->tokens).first(P));
    if (key == parent->children.end() || key->second.get() != n) {
      broken = where + ": not under its parent by its first page";
      return;
    }
    if (n->end != parent->end + int(n->tokens.size()) || n->end > geometry_.max_context) {
      broken = fmt::format("{}: parent ends at {}, edge {} tokens, max_context {}", where, parent->end,
                           n->tokens.size(), geometry_.max_context);
      return;
    }
    for (int p : n->pages) {
      if (p < 0 || p >= pages_.size() || pages_.refcount(p) < 1) {
        broken = fmt::format("{}: page {} is not in use", where, p);
        return;
      }
      if (page_seen[p]++) {
        broken = fmt::format("{}: page {} appears twice in the tree", where, p);
        return;
      }
      ++pages;
    }
    if (n->snapshot >= 0) {
      if (n->snapshot >= snapshots_.size() || snapshots_.refcount(n->snapshot) < 1) {
        broken = fmt::format("{}: snapshot {} is not in use", where, n->snapshot);
        return;
      }
      if (slot_seen[n->snapshot]++) {
        broken = fmt::format("{}: snapshot {} appears twice in the tree", where, n->snapshot);
        return;
      }
      ++snapshots;
    } else if (n->children.empty()) {
      broken = where + ": a leaf without a snapshot";
      return;
    }
    int child_locks = 0;
    for (auto& [k, c] : n->children) child_locks += c->lock;
    if (n->lock < child_locks) {
      broken = fmt::format("{}: lock {} below its children's {}", where, n->lock, child_locks);
      return;
    }
    if (parent != root && parent->last_access < n->last_access) {
      broken = where + ": used more recently than its parent";
      return;
    }
  });
  if (!broken.empty()) return broken;
  if (nodes != nodes_ || pages != cached_pages_ || snapshots != cached_snapshots_)
    return fmt::format("counts: {} nodes, {} pages, {} snapshots in the tree; recorded {}, {}, {}", nodes, pages,
                       snapshots, nodes_, cached_pages_, cached_snapshots_);
  return {};
}

void RadixCache::check_invariants() const {
  const std::string broken = audit();
  CHECK(broken.empty(), broken);
}

}  // namespace rocket
