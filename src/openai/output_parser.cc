#include "openai/output_parser.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "openai/random_id.h"

namespace rocket {

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kToolOpen = "<tool_call>";
constexpr std::string_view kToolClose = "</tool_call>";

// Length of the longest proper prefix of `tag` that `text` ends with.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, text.size()); k > 0; --k) {
    if (text.ends_with(tag.substr(0, k))) return k;
  }
  return 0;
}

}  // namespace

OutputParser::OutputParser(Options options, std::mt19937_64 id_rng) : options_(options), rng_(id_rng) {
  CHECK(options_.max_tool_calls >= 1, "max_tool_calls must allow a call");
  if (options_.reasoning_open) prime(kThinkOpen);
}

std::vector<OutputEvent> OutputParser::push(std::string_view text) {
  CHECK(!finished_, "push after finish");
  if (complete()) return {};
  pending_ += text;
  process(/*final=*/false);
  return std::exchange(events_, {});
}

void OutputParser::prime(std::string_view text) { push(text); }

std::vector<OutputEvent> OutputParser::finish() {
  CHECK(!finished_, "finish called twice");
  finished_ = true;
  if (complete()) return {};
  process(/*final=*/true);
  if (state_ == State::kToolCall) {
    emit(ContentDelta{std::string(block_newlines_, '\n') + std::string(kToolOpen) + block_});
    block_.clear();
  } else if (state_ == State::kContent && held_newlines_ > 0) {
    emit(ContentDelta{std::string(held_newlines_, '\n')});
  }
  held_newlines_ = 0;
  return std::exchange(events_, {});
}

std::vector<std::string_view> OutputParser::active_tags() const {
  switch (state_) {
    case State::kReasoning:
      return {kThinkClose};
    case State::kToolCall:
      return {kToolClose};
    case State::kContent:
      break;
  }
  std::vector<std::string_view> tags;
  if (think_allowed_) tags.push_back(kThinkOpen);
  if (options_.tool_calls) tags.push_back(kToolOpen);
  return tags;
}

// Classifies pending_ up to the first active tag, or up to a tail that could still become one. Each
// step re-reads the active tags, since emitting content disables <think>.
void OutputParser::process(bool final) {
  while (!pending_.empty()) {
    if (complete()) {
      pending_.clear();  // what follows the last allowed call is not part of the turn
      return;
    }
    const std::vector<std::string_view> tags = active_tags();
    size_t at = std::string::npos;
    std::string_view found;
    for (std::string_view t : tags) {
      const size_t p = pending_.find(t);
      if (p < at) {
        at = p;
        found = t;
      }
    }
    if (at == std::string::npos) {
      size_t keep = 0;
      if (!final) {
        for (std::string_view t : tags) keep = std::max(keep, partial_tag_suffix(pending_, t));
      }
      if (keep == pending_.size()) return;
      const std::string head = pending_.substr(0, pending_.size() - keep);
      pending_.erase(0, head.size());
      text(head);
    } else if (at > 0) {
      const std::string head = pending_.substr(0, at);
      pending_.erase(0, at);
      text(head);
    } else {
      pending_.erase(0, found.size());
      tag(found);
    }
  }
}

void OutputParser::text(std::string_view s) {
  switch (state_) {
    case State::kToolCall:
      block_ += s;
      break;
    case State::kReasoning:
      segment_text(s, /*reasoning=*/true);
      break;
    case State::kContent:
      segment_text(s, /*reasoning=*/false);
      break;
  }
}

void OutputParser::segment_text(std::string_view s, bool reasoning) {
  if (segment_start_) {
    const size_t first = s.find_first_not_of('\n');
    if (first == std::string_view::npos) return;
    s.remove_prefix(first);
    segment_start_ = false;
  }
  const size_t last = s.find_last_not_of('\n');
  if (last == std::string_view::npos) {
    held_newlines_ += s.size();
    return;
  }
  std::string out(held_newlines_, '\n');
  out += s.substr(0, last + 1);
  held_newlines_ = s.size() - last - 1;
  if (reasoning) {
    emit(ReasoningDelta{std::move(out)});
  } else {
    emit(ContentDelta{std::move(out)});
    think_allowed_ = false;
  }
}

void OutputParser::tag(std::string_view t) {
  if (t == kThinkOpen) {
    state_ = State::kReasoning;
    think_allowed_ = false;
    segment_start_ = true;
    held_newlines_ = 0;
  } else if (t == kThinkClose) {
    state_ = State::kContent;
    segment_start_ = true;
    held_newlines_ = 0;
  } else if (t == kToolOpen) {
    state_ = State::kToolCall;
    think_allowed_ = false;
    block_.clear();
    block_newlines_ = held_newlines_;
    held_newlines_ = 0;
  } else {
    close_tool_call();
  }
}

void OutputParser::close_tool_call() {
  using Json = nlohmann::ordered_json;  // keeps the model's key order in the arguments
  const Json doc = Json::parse(block_, nullptr, /*allow_exceptions=*/false);
  const Json* name = nullptr;
  const Json* arguments = nullptr;
  if (!doc.is_discarded() && doc.is_object()) {
    if (auto it = doc.find("name"); it != doc.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
      name = &*it;
    }
    if (auto it = doc.find("arguments"); it != doc.end()) arguments = &*it;
  }
  const bool valid = name && (!arguments || arguments->is_object());
  if (valid) {
    const int index = tool_calls_++;
    emit(ToolCallStart{index, tool_call_id(rng_), name->get<std::string>()});
    emit(ToolCallArgumentsDelta{
        index, arguments ? arguments->dump(-1, ' ', false, Json::error_handler_t::replace) : std::string("{}")});
    segment_start_ = true;
  } else {
    emit(ContentDelta{std::string(block_newlines_, '\n') + std::string(kToolOpen) + block_ + std::string(kToolClose)});
    think_allowed_ = false;
    segment_start_ = false;  // verbatim: what follows the block is kept as written
  }
  block_.clear();
  state_ = State::kContent;
}

void OutputParser::emit(OutputEvent event) {
  if (!events_.empty()) {
    if (auto* last = std::get_if<ContentDelta>(&events_.back())) {
      if (auto* next = std::get_if<ContentDelta>(&event)) {
        last->text += next->text;
        return;
      }
    }
    if (auto* last = std::get_if<ReasoningDelta>(&events_.back())) {
      if (auto* next = std::get_if<ReasoningDelta>(&event)) {
        last->text += next->text;
        return;
      }
    }
  }
  events_.push_back(std::move(event));
}

}  // namespace rocket
