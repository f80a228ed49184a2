#include "openai/responses_response.h"

#include <utility>
#include <variant>

#include "openai/random_id.h"
#include "openai/sealed_reasoning.h"

namespace rocket {

using Json = nlohmann::ordered_json;

ResponsesStream::ResponsesStream(std::string id, int64_t created_at, std::string model, Json echo, std::mt19937_64 rng,
                                 Options options)
    : options_(std::move(options)), rng_(rng) {
  response_ = {{"id", std::move(id)},
               {"object", "response"},
               {"created_at", created_at},
               {"status", "in_progress"},
               {"background", false},
               {"error", nullptr},
               {"incomplete_details", nullptr},
               {"model", std::move(model)},
               {"output", Json::array()},
               {"previous_response_id", nullptr},
               {"store", false},
               {"usage", nullptr}};
  for (auto& [key, value] : echo.items()) response_[key] = std::move(value);
}

std::string ResponsesStream::item_id(const char* prefix) { return random_id(prefix, 24, rng_); }

Json ResponsesStream::event(const char* type) { return {{"type", type}, {"sequence_number", sequence_++}}; }

std::vector<Json> ResponsesStream::start() {
  std::vector<Json> out;
  for (const char* type : {"response.created", "response.in_progress"}) {
    Json e = event(type);
    e["response"] = response_;
    out.push_back(std::move(e));
  }
  return out;
}

void ResponsesStream::open(Open kind, std::vector<Json>& out, const OutputEvent& first) {
  const int64_t index = int64_t(response_["output"].size());
  Json part;
  switch (kind) {
    case Open::kReasoning:
      item_ = {{"id", item_id("rs_")}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", Json::array()}};
      part = {{"type", "reasoning_text"}, {"text", ""}};
      break;
    case Open::kMessage:
      item_ = {{"id", item_id("msg_")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
               {"content", Json::array()}};
      part = {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
      break;
    case Open::kCall: {
      const auto& start = std::get<ToolCallStart>(first);
      item_ = {{"id", item_id("fc_")}, {"type", "function_call"}, {"status", "in_progress"}, {"arguments", ""},
               {"call_id", start.id}, {"name", start.name}};
      if (const auto ns = options_.namespace_of.find(start.name); ns != options_.namespace_of.end()) item_["namespace"] = ns->second;
      break;
    }
    case Open::kNone:
      return;
  }
  open_ = kind;
  response_["output"].push_back(item_);
  Json added = event("response.output_item.added");
  added["output_index"] = index;
  added["item"] = item_;
  out.push_back(std::move(added));
  if (part.is_null()) return;
  item_["content"].push_back(part);
  response_["output"].back()["content"].push_back(part);
  Json e = event("response.content_part.added");
  e["item_id"] = item_["id"];
  e["output_index"] = index;
  e["content_index"] = 0;
  e["part"] = std::move(part);
  out.push_back(std::move(e));
}

void ResponsesStream::close(std::vector<Json>& out, const char* status) {
  if (open_ == Open::kNone) return;
  const int64_t index = int64_t(response_["output"].size()) - 1;
  const Json id = item_["id"];
  if (open_ == Open::kCall) {
    Json e = event("response.function_call_arguments.done");
    e["item_id"] = id;
    e["output_index"] = index;
    e["name"] = item_["name"];
    e["arguments"] = item_["arguments"];
    out.push_back(std::move(e));
  } else {
    const Json& part = item_["content"][0];
    Json e = event(open_ == Open::kReasoning ? "response.reasoning_text.done" : "response.output_text.done");
    e["item_id"] = id;
    e["output_index"] = index;
    e["content_index"] = 0;
    e["text"] = part["text"];
    if (open_ == Open::kMessage) e["logprobs"] = Json::array();
    out.push_back(std::move(e));
    Json done = event("response.content_part.done");
    done["item_id"] = id;
    done["output_index"] = index;
    done["content_index"] = 0;
    done["part"] = part;
    out.push_back(std::move(done));
  }
  if (open_ != Open::kReasoning) item_["status"] = status;
  if (open_ == Open::kReasoning && options_.encrypted_reasoning)
    item_["encrypted_content"] = seal_reasoning(item_["content"][0]["text"].get<std::string>());
  response_["output"][size_t(index)] = item_;
  Json e = event("response.output_item.done");
  e["output_index"] = index;
  e["item"] = item_;
  out.push_back(std::move(e));
  open_ = Open::kNone;
}

std::vector<Json> ResponsesStream::on(const OutputEvent& ev) {
  std::vector<Json> out;
  const Open kind = std::holds_alternative<ReasoningDelta>(ev)  ? Open::kReasoning
                    : std::holds_alternative<ContentDelta>(ev)  ? Open::kMessage
                                                                 : Open::kCall;
  // Each call is its own item; its arguments follow its start.
  if (kind != open_ || std::holds_alternative<ToolCallStart>(ev)) {
    close(out);
    open(kind, out, ev);
    if (kind == Open::kCall) return out;
  }
  const int64_t index = int64_t(response_["output"].size()) - 1;
  Json e;
  std::string delta;
  if (const auto* r = std::get_if<ReasoningDelta>(&ev)) {
    delta = r->text;
    e = event("response.reasoning_text.delta");
  } else if (const auto* c = std::get_if<ContentDelta>(&ev)) {
    delta = c->text;
    e = event("response.output_text.delta");
  } else {
    delta = std::get<ToolCallArgumentsDelta>(ev).fragment;
    e = event("response.function_call_arguments.delta");
  }
  e["item_id"] = item_["id"];
  e["output_index"] = index;
  if (kind == Open::kCall) {
    item_["arguments"] = item_["arguments"].get<std::string>() + delta;
  } else {
    e["content_index"] = 0;
    Json& text = item_["content"][0]["text"];
    text = text.get<std::string>() + delta;
  }
  e["delta"] = std::move(delta);
  if (kind == Open::kMessage) e["logprobs"] = Json::array();
  response_["output"][size_t(index)] = item_;
  out.push_back(std::move(e));
  return out;
}

std::vector<Json> ResponsesStream::finish(FinishReason finish, const Usage& usage, int64_t reasoning_tokens) {
  std::vector<Json> out;
  const bool cut = finish == FinishReason::kLength;
  close(out, cut ? "incomplete" : "completed");
  response_["status"] = cut ? "incomplete" : "completed";
  if (cut) response_["incomplete_details"] = {{"reason", "max_output_tokens"}};
  response_["usage"] = {{"input_tokens", usage.prompt_tokens},
                        {"input_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
                        {"output_tokens", usage.completion_tokens},
                        {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
                        {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
  Json e = event(cut ? "response.incomplete" : "response.completed");
  e["response"] = response_;
  out.push_back(std::move(e));
  return out;
}

Json ResponsesStream::error(const ProtocolError& err) {
  Json e = event("error");
  e["code"] = err.code().empty() ? Json(err.type()) : Json(err.code());
  e["message"] = err.message();
  e["param"] = err.param().empty() ? Json(nullptr) : Json(err.param());
  return e;
}

}  // namespace rocket
