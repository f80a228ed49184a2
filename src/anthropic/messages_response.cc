#include "anthropic/messages_response.h"

#include <utility>
#include <variant>

namespace rocket {

using Json = nlohmann::ordered_json;

MessagesStream::MessagesStream(std::string id, std::string model, int64_t prompt_tokens) {
  message_ = {{"id", std::move(id)},
              {"type", "message"},
              {"role", "assistant"},
              {"model", std::move(model)},
              {"content", Json::array()},
              {"stop_reason", nullptr},
              {"stop_sequence", nullptr},
              {"usage", {{"input_tokens", prompt_tokens},
                         {"cache_creation_input_tokens", 0},
                         {"cache_read_input_tokens", 0},
                         {"output_tokens", 0}}}};
}

std::vector<Json> MessagesStream::start() { return {{{"type", "message_start"}, {"message", message_}}}; }

void MessagesStream::close(std::vector<Json>& out) {
  if (open_ == Open::kNone) return;
  Json& block = message_["content"].back();
  // The fragments of a call's arguments make one JSON object (the output parser checked it).
  if (open_ == Open::kToolUse) block["input"] = Json::parse(arguments_.empty() ? std::string("{}") : arguments_);
  out.push_back({{"type", "content_block_stop"}, {"index", message_["content"].size() - 1}});
  open_ = Open::kNone;
}

std::vector<Json> MessagesStream::on(const OutputEvent& ev) {
  std::vector<Json> out;
  const Open kind = std::holds_alternative<ReasoningDelta>(ev)  ? Open::kThinking
                    : std::holds_alternative<ContentDelta>(ev)  ? Open::kText
                                                                 : Open::kToolUse;
  if (kind != open_ || std::holds_alternative<ToolCallStart>(ev)) {
    close(out);
    Json block;
    if (kind == Open::kThinking) {
      block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
    } else if (kind == Open::kText) {
      block = {{"type", "text"}, {"text", ""}};
    } else {
      const auto& start = std::get<ToolCallStart>(ev);
      block = {{"type", "tool_use"}, {"id", start.id}, {"name", start.name}, {"input", Json::object()}};
      arguments_.clear();
    }
    message_["content"].push_back(block);
    out.push_back({{"type", "content_block_start"}, {"index", message_["content"].size() - 1}, {"content_block", block}});
    open_ = kind;
    if (kind == Open::kToolUse) return out;
  }
  Json& block = message_["content"].back();
  Json delta;
  if (const auto* r = std::get_if<ReasoningDelta>(&ev)) {
    block["thinking"] = block["thinking"].get<std::string>() + r->text;
    delta = {{"type", "thinking_delta"}, {"thinking", r->text}};
  } else if (const auto* c = std::get_if<ContentDelta>(&ev)) {
    block["text"] = block["text"].get<std::string>() + c->text;
    delta = {{"type", "text_delta"}, {"text", c->text}};
  } else {
    const std::string& fragment = std::get<ToolCallArgumentsDelta>(ev).fragment;
    arguments_ += fragment;
    delta = {{"type", "input_json_delta"}, {"partial_json", fragment}};
  }
  out.push_back({{"type", "content_block_delta"}, {"index", message_["content"].size() - 1}, {"delta", std::move(delta)}});
  return out;
}

std::vector<Json> MessagesStream::finish(FinishReason finish, const std::string& stop, bool tool_calls, const Usage& usage) {
  std::vector<Json> out;
  close(out);
  const char* reason = tool_calls                         ? "tool_use"
                       : finish == FinishReason::kLength  ? "max_tokens"
                       : !stop.empty()                    ? "stop_sequence"
                                                          : "end_turn";
  message_["stop_reason"] = reason;
  message_["stop_sequence"] = std::string_view(reason) == "stop_sequence" ? Json(stop) : Json(nullptr);
  message_["usage"] = {{"input_tokens", usage.prompt_tokens - usage.cached_tokens},
                       {"cache_creation_input_tokens", 0},
                       {"cache_read_input_tokens", usage.cached_tokens},
                       {"output_tokens", usage.completion_tokens}};
  out.push_back({{"type", "message_delta"},
                 {"delta", {{"stop_reason", message_["stop_reason"]}, {"stop_sequence", message_["stop_sequence"]}}},
                 {"usage", message_["usage"]}});
  out.push_back({{"type", "message_stop"}});
  return out;
}

}  // namespace rocket
