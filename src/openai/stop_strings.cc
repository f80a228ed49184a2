#include "openai/stop_strings.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace rocket {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopMatcher::Result StopMatcher::push(std::string_view piece) {
  CHECK(!stopped_, "push after a stop string");
  held_ += piece;
  // held_ is at most the longest stop string plus one piece, so a full search each time is cheap.
  size_t first = std::string::npos;
  for (const std::string& s : stops_)
    if (const size_t at = held_.find(s); at < first) first = at, matched_ = s;
  Result r;
  if (first != std::string::npos) {
    r.text = held_.substr(0, first);
    r.stopped = stopped_ = true;
    held_.clear();
    return r;
  }
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k) {
      if (std::string_view(held_).ends_with(std::string_view(s).substr(0, k))) {
        keep = k;
        break;
      }
    }
  }
  r.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, r.text.size());
  return r;
}

std::string StopMatcher::flush() { return std::exchange(held_, {}); }

}  // namespace rocket
