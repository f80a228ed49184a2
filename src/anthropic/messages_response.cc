#include "anthropic/messages_response.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "openai/sealed_reasoning.h"

namespace rocket {

using Json = nlohmann::ordered_json;

MessagesStream::MessagesStream(std::string id, std::string model, int64_t prompt_tokens, Options options)
    : options_(std::move(options)) {
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
  if (!options_.applied_edits.is_null()) message_["context_management"] = {{"applied_edits", options_.applied_edits}};
}

Json MessagesStream::usage(const Usage& u) const {
  // The pages the cache will hold after this prompt, less what it already held.
  const int64_t kept = options_.page_tokens > 0 ? u.prompt_tokens / options_.page_tokens * options_.page_tokens : 0;
  const int64_t created = std::max<int64_t>(0, kept - u.cached_tokens);
  Json out = {{"input_tokens", u.prompt_tokens - u.cached_tokens - created},
              {"cache_creation_input_tokens", created},
              {"cache_read_input_tokens", u.cached_tokens},
              {"output_tokens", u.completion_tokens}};
  if (options_.server_tools) out["server_tool_use"] = {{"web_search_requests", 0}, {"web_fetch_requests", 0}};
  return out;
}

std::vector<Json> MessagesStream::start() { return {{{"type", "message_start"}, {"message", message_}}}; }

void MessagesStream::close(std::vector<Json>& out) {
  if (open_ == Open::kNone) return;
  Json& block = message_["content"].back();
  // The fragments of a call's arguments make one JSON object (the output parser checked it).
  if (open_ == Open::kToolUse) block["input"] = Json::parse(arguments_.empty() ? std::string("{}") : arguments_);
  if (open_ == Open::kThinking) {
    block["signature"] = seal_reasoning(thinking_);
    out.push_back({{"type", "content_block_delta"},
                   {"index", message_["content"].size() - 1},
                   {"delta", {{"type", "signature_delta"}, {"signature", block["signature"]}}}});
    thinking_.clear();
  }
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
    thinking_ += r->text;
    if (options_.omit_thinking) return out;  // the signature carries it, at the block's end
    block["thinking"] = thinking_;
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
  message_["usage"] = this->usage(usage);
  Json delta = {{"type", "message_delta"},
                {"delta", {{"stop_reason", message_["stop_reason"]}, {"stop_sequence", message_["stop_sequence"]}}},
                {"usage", message_["usage"]}};
  if (message_.contains("context_management")) delta["context_management"] = message_["context_management"];
  out.push_back(std::move(delta));
  out.push_back({{"type", "message_stop"}});
  return out;
}

}  // namespace rocket
