#include "openai/output_parser.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "openai/random_id.h"

namespace rocket {

namespace {

using Json = nlohmann::ordered_json;  // keeps the model's key order in the arguments

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

ParameterTypes parameter_types(const std::vector<Tool>& tools) {
  ParameterTypes out;
  for (const Tool& t : tools) {
    auto& params = out[t.name];
    if (!t.parameters.is_object()) continue;
    const auto props = t.parameters.find("properties");
    if (props == t.parameters.end() || !props->is_object()) continue;
    for (const auto& [name, schema] : props->items()) {
      if (!schema.is_object()) continue;
      const auto type = schema.find("type");
      if (type == schema.end()) continue;
      std::vector<std::string> types;
      if (type->is_string()) types.push_back(type->get<std::string>());
      if (type->is_array())
        for (const auto& x : *type)
          if (x.is_string()) types.push_back(x.get<std::string>());
      if (!types.empty()) params[name] = std::move(types);
    }
  }
  return out;
}

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
      if (options_.format == ToolCallFormat::kXml && options_.tool_calls) return {kThinkClose, kToolOpen};
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
    // From reasoning (the XML format only): the reasoning ends here, and its trailing newlines with it.
    if (state_ == State::kReasoning) held_newlines_ = 0;
    state_ = State::kToolCall;
    think_allowed_ = false;
    block_.clear();
    block_newlines_ = held_newlines_;
    held_newlines_ = 0;
  } else {
    close_tool_call();
  }
}

std::optional<std::pair<std::string, std::string>> OutputParser::parse_json_call() const {
  const Json doc = Json::parse(block_, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  const auto name = doc.find("name");
  if (name == doc.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  const auto arguments = doc.find("arguments");
  if (arguments == doc.end()) return std::pair{name->get<std::string>(), std::string("{}")};
  if (!arguments->is_object()) return std::nullopt;
  return std::pair{name->get<std::string>(), arguments->dump(-1, ' ', false, Json::error_handler_t::replace)};
}

std::optional<std::pair<std::string, std::string>> OutputParser::parse_xml_call() const {
  std::string_view b = block_;
  const auto skip_space = [&] {
    const size_t n = b.find_first_not_of(" \t\r\n");
    b.remove_prefix(n == std::string_view::npos ? b.size() : n);
  };
  // '<OPEN' NAME '>': the name, or empty when the block does not start so.
  const auto opening = [&](std::string_view open) -> std::string_view {
    if (!b.starts_with(open)) return {};
    const size_t end = b.find('>', open.size());
    if (end == std::string_view::npos) return {};
    const std::string_view name = b.substr(open.size(), end - open.size());
    if (name.empty() || name.find_first_of("<\n") != std::string_view::npos) return {};
    b.remove_prefix(end + 1);
    return name;
  };
  skip_space();
  const std::string_view function = opening("<function=");
  if (function.empty()) return std::nullopt;
  const std::map<std::string, std::vector<std::string>, std::less<>>* declared = nullptr;
  if (options_.parameters) {
    if (auto it = options_.parameters->find(function); it != options_.parameters->end()) declared = &it->second;
  }
  Json arguments = Json::object();
  for (;;) {
    skip_space();
    if (b.starts_with("</function>")) break;
    const std::string_view parameter = opening("<parameter=");
    if (parameter.empty()) return std::nullopt;
    const size_t end = b.find("</parameter>");
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view value = b.substr(0, end);
    b.remove_prefix(end + std::string_view("</parameter>").size());
    // The block format puts the value on lines of its own: one newline each side is layout.
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    const std::vector<std::string>* types = nullptr;
    if (declared) {
      if (auto it = declared->find(parameter); it != declared->end()) types = &it->second;
    }
    const bool verbatim = !types || std::find(types->begin(), types->end(), "string") != types->end();
    Json v = verbatim ? Json(std::string(value)) : Json::parse(value, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded()) v = std::string(value);
    arguments[std::string(parameter)] = std::move(v);
  }
  b.remove_prefix(std::string_view("</function>").size());
  skip_space();
  if (!b.empty()) return std::nullopt;
  return std::pair{std::string(function), arguments.dump(-1, ' ', false, Json::error_handler_t::replace)};
}

void OutputParser::close_tool_call() {
  const auto call = options_.format == ToolCallFormat::kXml ? parse_xml_call() : parse_json_call();
  if (call) {
    const int index = tool_calls_++;
    emit(ToolCallStart{index, tool_call_id(rng_), call->first});
    emit(ToolCallArgumentsDelta{index, call->second});
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
