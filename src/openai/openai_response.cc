#include "openai/openai_response.h"

#include <cmath>

#include "core/error.h"
#include "core/utf8.h"

namespace rocket {

namespace {

using Json = nlohmann::ordered_json;

// JSON has no -inf; OpenAI writes -9999.0 for a token of zero probability.
double finite_logprob(double lp) { return std::isfinite(lp) ? lp : -9999.0; }

std::string token_text(std::string_view bytes) {
  std::string text;
  append_utf8_lossy(bytes, text, /*final=*/true);
  return text;
}

Json byte_values(std::string_view bytes) {
  Json values = Json::array();
  for (char c : bytes) values.push_back(int(uint8_t(c)));
  return values;
}

Json head(const ResponseMeta& meta, std::string_view object) {
  Json j = {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
  if (!meta.system_fingerprint.empty()) j["system_fingerprint"] = meta.system_fingerprint;
  return j;
}

Json finish_json(std::optional<FinishReason> finish) {
  return finish ? Json(finish_reason_name(*finish)) : Json();
}

}  // namespace

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
  }
  return "stop";
}

Json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

Json chat_logprobs_json(std::span<const TokenLogprob> tokens) {
  Json content = Json::array();
  for (const TokenLogprob& t : tokens) {
    Json top = Json::array();
    for (const auto& [bytes, lp] : t.top) {
      top.push_back({{"token", token_text(bytes)}, {"logprob", finite_logprob(lp)}, {"bytes", byte_values(bytes)}});
    }
    content.push_back({{"token", token_text(t.bytes)},
                       {"logprob", finite_logprob(t.logprob)},
                       {"bytes", byte_values(t.bytes)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

Json completion_logprobs_json(std::span<const TokenLogprob> tokens, int64_t& text_offset) {
  Json text = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  for (const TokenLogprob& t : tokens) {
    const std::string s = token_text(t.bytes);
    text.push_back(s);
    lps.push_back(finite_logprob(t.logprob));
    Json top = Json::object();
    for (const auto& [bytes, lp] : t.top) top[token_text(bytes)] = finite_logprob(lp);
    // "The API will always return the logprob of the sampled token, so there may be up to logprobs+1
    // elements" (OpenAI, legacy completions).
    if (!top.contains(s)) top[s] = finite_logprob(t.logprob);
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += int64_t(code_point_count(s));
  }
  return {{"tokens", std::move(text)},
          {"token_logprobs", std::move(lps)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

void AssistantTurn::add(const OutputEvent& event) {
  if (const auto* e = std::get_if<ContentDelta>(&event)) {
    content += e->text;
  } else if (const auto* e = std::get_if<ReasoningDelta>(&event)) {
    reasoning_content += e->text;
  } else if (const auto* e = std::get_if<ToolCallStart>(&event)) {
    CHECK(e->index == int(tool_calls.size()), "tool calls start in index order");
    tool_calls.push_back(ToolCall{e->id, e->name, ""});
  } else if (const auto* e = std::get_if<ToolCallArgumentsDelta>(&event)) {
    CHECK(e->index >= 0 && e->index < int(tool_calls.size()), "arguments for a tool call that was started");
    tool_calls[size_t(e->index)].arguments += e->fragment;
  }
}

Json chat_completion_json(const ResponseMeta& meta, const AssistantTurn& turn, FinishReason finish,
                          const Usage& usage, const Json& logprobs) {
  Json message = {{"role", "assistant"}};
  message["content"] = turn.content.empty() && !turn.tool_calls.empty() ? Json() : Json(turn.content);
  if (!turn.reasoning_content.empty()) message["reasoning_content"] = turn.reasoning_content;
  if (!turn.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ToolCall& c : turn.tool_calls) {
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    message["tool_calls"] = std::move(calls);
  }
  message["refusal"] = nullptr;
  Json j = head(meta, "chat.completion");
  j["choices"] = Json::array(
      {{{"index", meta.choice}, {"message", std::move(message)}, {"logprobs", logprobs}, {"finish_reason", finish_reason_name(finish)}}});
  j["usage"] = usage_json(usage);
  return j;
}

Json chat_chunk_json(const ResponseMeta& meta, Json delta, std::optional<FinishReason> finish, const Json& logprobs) {
  Json j = head(meta, "chat.completion.chunk");
  j["choices"] = Json::array(
      {{{"index", meta.choice}, {"delta", std::move(delta)}, {"logprobs", logprobs}, {"finish_reason", finish_json(finish)}}});
  if (meta.stream_usage) j["usage"] = nullptr;
  return j;
}

Json chat_role_delta() { return {{"role", "assistant"}, {"content", ""}}; }

Json chat_event_delta(const OutputEvent& event) {
  if (const auto* e = std::get_if<ContentDelta>(&event)) return {{"content", e->text}};
  if (const auto* e = std::get_if<ReasoningDelta>(&event)) return {{"reasoning_content", e->text}};
  if (const auto* e = std::get_if<ToolCallStart>(&event)) {
    return {{"tool_calls", Json::array({{{"index", e->index},
                                         {"id", e->id},
                                         {"type", "function"},
                                         {"function", {{"name", e->name}, {"arguments", ""}}}}})}};
  }
  const auto& e = std::get<ToolCallArgumentsDelta>(event);
  return {{"tool_calls", Json::array({{{"index", e.index}, {"function", {{"arguments", e.fragment}}}}})}};
}

Json chat_usage_chunk_json(const ResponseMeta& meta, const Usage& usage) {
  Json j = head(meta, "chat.completion.chunk");
  j["choices"] = Json::array();
  j["usage"] = usage_json(usage);
  return j;
}

Json completion_json(const ResponseMeta& meta, std::string_view text, FinishReason finish, const Usage& usage,
                     const Json& logprobs) {
  Json j = head(meta, "text_completion");
  j["choices"] = Json::array(
      {{{"text", text}, {"index", meta.choice}, {"logprobs", logprobs}, {"finish_reason", finish_reason_name(finish)}}});
  j["usage"] = usage_json(usage);
  return j;
}

Json completion_chunk_json(const ResponseMeta& meta, std::string_view text, std::optional<FinishReason> finish,
                           const Json& logprobs) {
  Json j = head(meta, "text_completion");
  j["choices"] =
      Json::array({{{"text", text}, {"index", meta.choice}, {"logprobs", logprobs}, {"finish_reason", finish_json(finish)}}});
  if (meta.stream_usage) j["usage"] = nullptr;
  return j;
}

Json completion_usage_chunk_json(const ResponseMeta& meta, const Usage& usage) {
  Json j = head(meta, "text_completion");
  j["choices"] = Json::array();
  j["usage"] = usage_json(usage);
  return j;
}

}  // namespace rocket
