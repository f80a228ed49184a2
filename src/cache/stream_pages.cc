#include "cache/stream_pages.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace rocket {

StreamPages::StreamPages(RadixCache& cache) : cache_(&cache) {}

StreamPages StreamPages::resume(RadixCache& cache, std::span<const int32_t> tokens) {
  StreamPages s(cache);
  if (tokens.size() < 2) return s;
  PrefixMatch m = cache.match(tokens.first(tokens.size() - 1));
  if (m.tokens == 0) return s;
  cache.lock(m.node);
  s.node_ = m.node;
  for (int p : m.pages) cache.pages().retain(p);
  s.pages_ = std::move(m.pages);
  s.tokens_.assign(tokens.begin(), tokens.begin() + m.tokens);
  s.restore_ = m.snapshot;
  s.resumed_tokens_ = m.tokens;
  return s;
}

StreamPages::StreamPages(StreamPages&& o) noexcept
    : cache_(o.cache_),
      tokens_(std::move(o.tokens_)),
      pages_(std::move(o.pages_)),
      node_(std::exchange(o.node_, nullptr)),
      restore_(std::exchange(o.restore_, std::nullopt)),
      resumed_tokens_(std::exchange(o.resumed_tokens_, 0)),
      captured_(std::exchange(o.captured_, -1)),
      captured_tokens_(std::exchange(o.captured_tokens_, 0)) {
  o.tokens_.clear();
  o.pages_.clear();
}

StreamPages& StreamPages::operator=(StreamPages&& o) noexcept {
  if (this == &o) return *this;
  release();
  cache_ = o.cache_;
  tokens_ = std::move(o.tokens_);
  pages_ = std::move(o.pages_);
  o.tokens_.clear();
  o.pages_.clear();
  node_ = std::exchange(o.node_, nullptr);
  restore_ = std::exchange(o.restore_, std::nullopt);
  resumed_tokens_ = std::exchange(o.resumed_tokens_, 0);
  captured_ = std::exchange(o.captured_, -1);
  captured_tokens_ = std::exchange(o.captured_tokens_, 0);
  return *this;
}

StreamPages::~StreamPages() { release(); }

StreamPages StreamPages::fork() {
  StreamPages c(*cache_);
  c.tokens_ = tokens_;
  c.pages_ = pages_;
  for (int p : pages_) cache_->pages().retain(p);
  if (captured_ >= 0) {
    cache_->snapshots().retain(captured_);
    c.captured_ = captured_;
    c.captured_tokens_ = captured_tokens_;
  }
  if (node_) {
    cache_->lock(node_);
    c.node_ = node_;
  }
  c.restore_ = restore_;
  c.resumed_tokens_ = resumed_tokens_;
  return c;
}

std::optional<Extension> StreamPages::extend(std::span<const int32_t> tokens) {
  const CacheGeometry& g = cache_->geometry();
  const int64_t len = length(), n = int64_t(tokens.size());
  CHECK(len + n <= g.max_context, "extend beyond max_context");
  Extension e;
  const int fill = int(len % g.page_tokens);
  e.first_page = fill ? int(pages_.size()) - 1 : int(pages_.size());
  if (n == 0) return e;
  // NOTE: only a partially filled page is ever written; a full page stays shared forever.
  const bool privatise = fill != 0 && cache_->pages().refcount(pages_.back()) > 1;
  const int need = g.pages_for(len + n) - g.pages_for(len) + (privatise ? 1 : 0);
  std::vector<int> fresh;
  fresh.reserve(need);
  for (int i = 0; i < need; ++i) {
    std::optional<int> p = cache_->alloc_page();
    if (!p) {
      for (int q : fresh) cache_->pages().release(q);
      return std::nullopt;
    }
    fresh.push_back(*p);
  }
  auto next = fresh.begin();
  if (privatise) {
    e.copy = PageCopy{.src = pages_.back(), .dst = *next, .tokens = fill};
    cache_->pages().release(pages_.back());
    pages_.back() = *next++;
  }
  pages_.insert(pages_.end(), next, fresh.end());
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  return e;
}

void StreamPages::rewrite_tail(std::span<const int32_t> tokens) {
  const int from = length() - int(tokens.size());
  CHECK(from >= std::max(captured_tokens_, resumed_tokens_), "rewrite of captured or resumed tokens");
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + from);
}

void StreamPages::truncate(int length) {
  CHECK(length >= std::max(captured_tokens_, resumed_tokens_) && length <= this->length(),
        "truncate below what is captured or resumed, or beyond the stream");
  const int keep = cache_->geometry().pages_for(length);
  // NOTE: a page past `keep` holds only tokens extend() added after every capture, so it is this
  // stream's alone (a shared page is always full and before them).
  for (size_t i = size_t(keep); i < pages_.size(); ++i) cache_->pages().release(pages_[i]);
  pages_.resize(size_t(keep));
  tokens_.resize(size_t(length));
}

std::optional<int> StreamPages::capture_snapshot(int at) {
  const int P = cache_->geometry().page_tokens;
  CHECK(at > 0 && at % P == 0, "snapshots are captured at page boundaries");
  CHECK(at > captured_tokens_ && at <= length(), "snapshot boundary not past the last one or beyond the stream");
  if (captured_ < 0 || cache_->snapshots().refcount(captured_) > 1) {
    // NOTE: a slot the cache or a fork also holds is immutable; only an exclusive one is reused.
    std::optional<int> slot = cache_->alloc_snapshot();
    if (!slot) return std::nullopt;
    if (captured_ >= 0) cache_->snapshots().release(captured_);
    captured_ = *slot;
  }
  captured_tokens_ = at;
  return captured_;
}

int StreamPages::publish() {
  if (captured_ < 0) return 0;
  const int P = cache_->geometry().page_tokens;
  Insertion r = cache_->insert(std::span<const int32_t>(tokens_).first(captured_tokens_),
                               std::span<const int>(pages_).first(captured_tokens_ / P), captured_);
  cache_->lock(r.node);
  if (node_) cache_->unlock(node_);
  node_ = r.node;
  restore_.reset();
  return r.new_pages * P;
}

int StreamPages::detach() {
  const int cached = publish();
  release();
  return cached;
}

void StreamPages::release() {
  if (!cache_) return;
  for (int p : pages_) cache_->pages().release(p);
  pages_.clear();
  tokens_.clear();
  if (captured_ >= 0) cache_->snapshots().release(captured_);
  captured_ = -1;
  captured_tokens_ = 0;
  if (node_) cache_->unlock(node_);
  node_ = nullptr;
  restore_.reset();
  resumed_tokens_ = 0;
}

void StreamPages::add_refs(std::vector<int>& page_refs, std::vector<int>& snapshot_refs) const {
  for (int p : pages_) ++page_refs.at(p);
  if (captured_ >= 0) ++snapshot_refs.at(captured_);
}

std::string StreamPages::audit() const {
  const CacheGeometry& g = cache_->geometry();
  if (int(pages_.size()) != g.pages_for(length()))
    return fmt::format("stream of {} tokens holds {} pages (needs {})", length(), pages_.size(), g.pages_for(length()));
  std::vector<int> sorted = pages_;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return "a page appears twice in a stream";
  for (int p : pages_)
    if (p < 0 || p >= cache_->pages().size() || cache_->pages().refcount(p) < 1)
      return fmt::format("stream page {} is not in use", p);
  if (captured_ >= 0) {
    if (captured_ >= cache_->snapshots().size() || cache_->snapshots().refcount(captured_) < 1)
      return fmt::format("captured snapshot {} is not in use", captured_);
    if (captured_tokens_ <= 0 || captured_tokens_ > length() || captured_tokens_ % g.page_tokens != 0)
      return fmt::format("snapshot captured at {} in a stream of {} tokens", captured_tokens_, length());
  }
  return {};
}

}  // namespace rocket
