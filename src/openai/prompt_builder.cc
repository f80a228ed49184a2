#include "openai/prompt_builder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_number.h"
#include "openai/protocol_error.h"
#include "vision/image_error.h"

namespace fs = std::filesystem;

namespace rocket {

using Json = nlohmann::ordered_json;

namespace {

Json read_json_file(const fs::path& p) {
  std::ifstream f(p);
  if (!f) fail("{}: cannot read", p.string());
  Json j = Json::parse(f, nullptr, false);
  if (j.is_discarded()) fail("{}: not JSON", p.string());
  return j;
}

// A special token's text from tokenizer_config.json: a string or {"content": ...}.
std::string token_string(const Json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const Json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

Json messages_json(const std::vector<ChatMessage>& messages) {
  Json out = Json::array();
  for (const ChatMessage& m : messages) {
    Json j = Json::object();
    j["role"] = m.role;
    if (!m.parts.empty()) {
      // As HF hands a processor's messages to the template: a list of items, {"type": "image"} for an
      // image (Qwen3.5's render_content takes an item with type image, or a key image or image_url).
      Json parts = Json::array();
      for (const ChatMessage::Part& part : m.parts)
        parts.push_back(part.image >= 0 ? Json{{"type", "image"}} : Json{{"type", "text"}, {"text", part.text}});
      j["content"] = std::move(parts);
    } else if (m.content) {
      j["content"] = *m.content;
    } else {
      j["content"] = nullptr;
    }
    if (!m.name.empty()) j["name"] = m.name;
    if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
    if (!m.tool_calls.empty()) {
      Json calls = Json::array();
      // Arguments reach the template as the mapping they stand for (the request parser checked the text
      // is an object): templates iterate it (`|items`) or write it back with `tojson`.
      for (const ToolCall& c : m.tool_calls)
        calls.push_back(Json{{"id", c.id}, {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", Json::parse(c.arguments)}}}});
      j["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    out.push_back(std::move(j));
  }
  return out;
}

Json tools_json(const std::vector<Tool>& tools) {
  Json out = Json::array();
  for (const Tool& t : tools) {
    Json f = Json::object();
    f["name"] = t.name;
    if (!t.description.empty()) f["description"] = t.description;
    if (!t.parameters.is_null()) f["parameters"] = t.parameters;
    out.push_back(Json{{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

bool ends_inside_think(const std::string& prompt) {
  const size_t open = prompt.rfind("<think>");
  return open != std::string::npos && prompt.find("</think>", open) == std::string::npos;
}

}  // namespace

std::string forced_opening(const CompletionRequest& r, bool reasoning_open, ToolCallFormat format) {
  if (r.kind != CompletionRequest::Kind::kChat) return "";
  const bool xml = format == ToolCallFormat::kXml;
  std::string call;
  switch (r.tool_choice.mode) {
    case ToolChoice::Mode::kAuto:
    case ToolChoice::Mode::kNone:
      return "";
    case ToolChoice::Mode::kRequired:
      call = xml ? "<tool_call>\n<function=" : "<tool_call>\n{\"name\": \"";
      break;
    case ToolChoice::Mode::kFunction:
      // The name is one of the request's tools, whose names are [a-zA-Z0-9_-]: nothing to escape.
      call = xml ? "<tool_call>\n<function=" + r.tool_choice.function + ">\n"
                 : "<tool_call>\n{\"name\": \"" + r.tool_choice.function + "\", \"arguments\": ";
      break;
  }
  // NOTE: a template that opens reasoning ends its generation prompt with '<think>\n', and writes an
  // empty reasoning block (thinking disabled, or a past turn's) as '<think>\n\n</think>\n\n': the
  // forced call follows the same empty block, as in a turn that did not think.
  return reasoning_open ? "\n</think>\n\n" + call : call;
}

std::vector<int32_t> eos_token_ids(const std::string& engine_dir) {
  std::vector<int32_t> eos;
  const fs::path path = fs::path(engine_dir) / "generation_config.json";
  if (!fs::exists(path)) return eos;
  const Json g = read_json_file(path);
  if (g.contains("eos_token_id")) {
    try {
      if (g["eos_token_id"].is_array()) {
        for (const auto& v : g["eos_token_id"]) eos.push_back(json_number<int32_t>(v));
      } else if (g["eos_token_id"].is_number_integer()) {
        eos.push_back(json_number<int32_t>(g["eos_token_id"]));
      }
    } catch (const Json::exception& e) {
      fail("{}: eos_token_id {}: {}", path.string(), g["eos_token_id"].dump(), e.what());
    }
  }
  return eos;
}

PromptBuilder::PromptBuilder(const std::string& engine_dir)
    : tokenizer_(Tokenizer::load((fs::path(engine_dir) / "tokenizer.json").string())) {
  const fs::path cfg_path = fs::path(engine_dir) / "tokenizer_config.json";
  if (fs::exists(cfg_path)) {
    const Json cfg = read_json_file(cfg_path);
    if (cfg.contains("chat_template") && cfg["chat_template"].is_string()) {
      template_ = ChatTemplate::compile(cfg["chat_template"].get<std::string>());
      tool_call_format_ = tool_call_format_of(cfg["chat_template"].get_ref<const std::string&>());
      template_reads_reasoning_effort_ =
          cfg["chat_template"].get_ref<const std::string&>().find("reasoning_effort") != std::string::npos;
    }
    template_vars_["bos_token"] = token_string(cfg, "bos_token");
    template_vars_["eos_token"] = token_string(cfg, "eos_token");
  }
  eos_ = eos_token_ids(engine_dir);
}

std::string PromptBuilder::render_chat(const CompletionRequest& r) const {
  if (!template_) throw ProtocolError(400, "this model has no chat template; use /v1/completions", "messages");
  // NOTE: a template that never iterates a content (Qwen3's) is handed strings; it has no place for
  // an image, and a placeholder Rocket put in the text for it would be a guess at the model's format.
  if (!r.images.empty() && !template_->takes_content_parts())
    throw ProtocolError(400, "This model's chat template does not place images (it reads text content only).",
                        r.images.front().param, "invalid_request_error", "unsupported_value");
  Json ctx = template_vars_;
  ctx["messages"] = messages_json(r.messages);
  if (!r.tools.empty() && r.tool_choice.mode != ToolChoice::Mode::kNone) ctx["tools"] = tools_json(r.tools);
  ctx["add_generation_prompt"] = true;
  for (const auto& [key, value] : r.template_kwargs.items()) ctx[key] = value;
  if (r.reasoning_effort && (template_reads_reasoning_effort_ || !r.reasoning_effort_hint)) {
    if (!template_reads_reasoning_effort_)
      throw ProtocolError(400, "This model's chat template does not read reasoning_effort; use "
                               "chat_template_kwargs.enable_thinking to turn thinking on or off.",
                          "reasoning_effort", "invalid_request_error", "unsupported_parameter");
    ctx["reasoning_effort"] = *r.reasoning_effort;
  }
  try {
    return template_->render(ctx);
  } catch (const ProtocolError&) {
    throw;
  } catch (const Error& e) {
    throw ProtocolError(400, std::string("the chat template refused the conversation: ") + e.what(), "messages");
  }
}

namespace {

// The prompt's budget: `p.ids` (the prompt as the engine runs it) must leave room in the context, and
// the request's max_tokens must fit what is left.
void fit_context(Prompt& p, const CompletionRequest& r, int64_t max_context, const char* field) {
  if (p.ids.empty()) throw ProtocolError(400, "the prompt encodes to no tokens", field);
  const int64_t n = int64_t(p.ids.size());
  if (n >= max_context)
    throw ProtocolError(400, fmt::format("This model's maximum context length is {} tokens; the prompt has {} tokens.",
                                         max_context, n),
                        field, "invalid_request_error", "context_length_exceeded");
  p.max_tokens = max_context - n;
  if (r.max_tokens) {
    if (*r.max_tokens > max_context - n)  // not n + max_tokens: a client may send up to 2^63 - 1
      throw ProtocolError(400, fmt::format("This model's maximum context length is {} tokens; the prompt ({} tokens) plus "
                                           "max_tokens ({}) exceed it.", max_context, n, *r.max_tokens),
                          "max_tokens", "invalid_request_error", "context_length_exceeded");
    p.max_tokens = *r.max_tokens;
  }
}

}  // namespace

std::vector<PromptImage> expand_image_pads(std::vector<int32_t>& ids, int32_t image_pad,
                                           const std::vector<ImageInput>& images, const ImageRules& rules) {
  const size_t pads = size_t(std::count(ids.begin(), ids.end(), image_pad));
  if (pads != images.size())
    throw ProtocolError(400,
                        fmt::format("The prompt holds {} image placeholders (<|image_pad|>) for {} images; message text "
                                    "may not spell the image placeholder itself.", pads, images.size()),
                        "messages", "invalid_request_error", "invalid_value");
  std::vector<PromptImage> out;
  out.reserve(images.size());
  for (const ImageInput& image : images) {
    try {
      const ImageDigest digest = hash_image_bytes(image.bytes);
      std::optional<PixelPatches> seen = rules.seen ? rules.seen->find(digest) : std::nullopt;
      if (!seen) {
        seen = preprocess_image(decode_image(image.bytes, rules.limits), rules.processor);
        if (rules.seen) rules.seen->insert(digest, *seen);
      }
      out.push_back({.pixels = std::move(*seen), .digest = digest});
    } catch (const ImageError& e) {
      throw ProtocolError(e.http_status(), fmt::format("Invalid image in '{}': {}.", image.param, e.what()), image.param,
                          "invalid_request_error", e.http_status() == 413 ? "image_too_large" : "invalid_image");
    }
  }
  std::vector<int32_t> expanded;
  size_t total = ids.size();
  for (const PromptImage& image : out) total += size_t(image.pixels.vision_tokens) - 1;
  expanded.reserve(total);
  size_t next = 0;
  for (int32_t id : ids) {
    if (id != image_pad) {
      expanded.push_back(id);
      continue;
    }
    PromptImage& image = out[next++];
    image.first_token = int64_t(expanded.size());
    expanded.insert(expanded.end(), size_t(image.pixels.vision_tokens), image_pad);
  }
  ids = std::move(expanded);
  return out;
}

Prompt PromptBuilder::build(const CompletionRequest& r, int vocab, int64_t max_context) const {
  if (!r.images.empty())
    throw ProtocolError(400, "This engine does not run images yet: send the request without image parts.",
                        r.images.front().param, "invalid_request_error", "unsupported_value");
  Prompt p;
  p.tool_call_format = tool_call_format_;
  const char* field = r.kind == CompletionRequest::Kind::kChat ? "messages" : "prompt";
  // A prompt of max_context tokens or more is refused; tokenizing stops as soon as it is known to be one.
  const auto encode = [&](std::string_view text) {
    std::optional<std::vector<int32_t>> ids = tokenizer_.encode_within(text, size_t(std::max<int64_t>(max_context - 1, 0)));
    if (!ids)
      throw ProtocolError(400, fmt::format("This model's maximum context length is {} tokens; the prompt has more.",
                                           max_context),
                          field, "invalid_request_error", "context_length_exceeded");
    return std::move(*ids);
  };
  if (r.kind == CompletionRequest::Kind::kChat) {
    const std::string text = render_chat(r);
    p.reasoning_open = ends_inside_think(text);
    p.ids = encode(text + forced_opening(r, p.reasoning_open, tool_call_format_));
  } else if (const auto* text = std::get_if<std::string>(&r.prompt)) {
    p.ids = encode(*text);
  } else {
    p.ids = std::get<std::vector<int32_t>>(r.prompt);
    for (int32_t id : p.ids)
      if (id < 0 || id >= vocab)
        throw ProtocolError(400, fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab), "prompt");
  }
  fit_context(p, r, max_context, field);
  return p;
}

ImagePrompt PromptBuilder::build_with_images(const CompletionRequest& r, int vocab, int64_t max_context,
                                             const ImageRules& rules) const {
  const std::optional<int32_t> image_pad = tokenizer_.token_id("<|image_pad|>");
  if (r.images.empty()) {
    ImagePrompt text{.prompt = build(r, vocab, max_context), .images = {}};
    // An engine that runs images reads every image_pad as an image's: a chat text may not spell one.
    if (image_pad && r.kind == CompletionRequest::Kind::kChat) expand_image_pads(text.prompt.ids, *image_pad, {}, rules);
    return text;
  }
  if (!image_pad)
    throw ProtocolError(400, "This model's tokenizer has no image token (<|image_pad|>): it reads text only.",
                        r.images.front().param, "invalid_request_error", "unsupported_value");
  ImagePrompt out;
  Prompt& p = out.prompt;
  p.tool_call_format = tool_call_format_;
  const std::string text = render_chat(r);
  p.reasoning_open = ends_inside_think(text);
  std::optional<std::vector<int32_t>> ids = tokenizer_.encode_within(
      text + forced_opening(r, p.reasoning_open, tool_call_format_), size_t(std::max<int64_t>(max_context - 1, 0)));
  if (!ids)
    throw ProtocolError(400, fmt::format("This model's maximum context length is {} tokens; the prompt has more.",
                                         max_context),
                        "messages", "invalid_request_error", "context_length_exceeded");
  p.ids = std::move(*ids);
  out.images = expand_image_pads(p.ids, *image_pad, r.images, rules);
  fit_context(p, r, max_context, "messages");
  return out;
}

}  // namespace rocket
