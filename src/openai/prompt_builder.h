// PromptBuilder: a request's prompt, as the engine will see it. Renders chat messages with the fuel's
// chat template, tokenises, and checks the result against the plan's context, so that everything that
// can be refused is refused on the HTTP thread with a 400 before the request is queued.
//
// tool_choice "required" or a named function: the prompt ends with the opening of a tool call
// (forced_opening), so the model's turn continues a call it cannot decline, and the output parser
// starts as if it had read that opening; where the engine masks its picks the rest of the call is
// generated under the tool-call grammar too (grammar/tool_calls.h), primed with the same opening.
//
// Thread safety: const methods may run concurrently (the Tokenizer and ChatTemplate are immutable).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai/openai_request.h"
#include "openai/tool_call_format.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "vision/image_decode.h"
#include "vision/image_hash.h"
#include "vision/image_processor.h"
#include "vision/patch_cache.h"

namespace rocket {

struct Prompt {
  std::vector<int32_t> ids;
  int64_t max_tokens = 0;       // the request's, or what is left of the context
  // Chat: the chat template's rendering ends inside <think> (before any forced opening), so the
  // output parser starts in reasoning.
  bool reasoning_open = false;
  ToolCallFormat tool_call_format = ToolCallFormat::kJson;  // the fuel's, for the output parser
};

// One image of a prompt, ready for the tower: the processor's patches and grid, the content hash the
// prefix cache will key its tokens by, and where its run of image_pad tokens starts.
struct PromptImage {
  PixelPatches pixels;          // pixel_values, grid_thw; vision_tokens image_pads in the prompt
  ImageDigest digest;           // SHA-256 of the bytes the client sent
  int64_t first_token = 0;      // index in the prompt's ids of its first image_pad
};

// A chat prompt with images: the ids with each image's single <|image_pad|> expanded to its
// vision_tokens, and the images in prompt order (the order of the request's images).
struct ImagePrompt {
  Prompt prompt;
  std::vector<PromptImage> images;
};

// Image input's pixel rules: the processor's (the plan's pixel bounds) and the decoder's bounds; and
// where given, the patches of images seen before under these rules, by their bytes' digest
// (vision/patch_cache.h), which a resent image takes instead of being decoded and preprocessed again.
struct ImageRules {
  VisionProcessorConfig processor;
  ImageLimits limits;
  PatchCache* seen = nullptr;
};

class PromptBuilder {
 public:
  // Loads ENGINE_DIR's tokenizer.json, compiles tokenizer_config.json's chat_template (when there is
  // one) and reads generation_config.json's eos ids.
  explicit PromptBuilder(const std::string& engine_dir);

  // Throws ProtocolError 400 naming the field: no chat template, a conversation the template
  // refuses, token ids outside [0, vocab), an empty prompt, prompt (+ max_tokens) over max_context,
  // and any request with images: this is the prompt of an engine that runs no images (the scheduler
  // calls build_with_images where the plan carries a vision tower, and refuses images, saying why,
  // where it does not).
  Prompt build(const CompletionRequest& request, int vocab, int64_t max_context) const;
  // A request's prompt with its images (none is fine; a chat text may not spell <|image_pad|>, which an
  // engine that runs images takes for an image's token): build()'s checks, each image decoded and
  // preprocessed under `rules` (an ImageError is a 400 naming its part, 413 for a bound), the
  // image_pads expanded (expand_image_pads), and the context checked on the expanded length.
  ImagePrompt build_with_images(const CompletionRequest& request, int vocab, int64_t max_context,
                                const ImageRules& rules) const;
  // The text the chat template renders a chat request to, with its generation prompt; build()
  // appends forced_opening() to it.
  std::string render_chat(const CompletionRequest& request) const;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const std::vector<int32_t>& eos() const { return eos_; }
  // Read from the chat template (tool_call_format_of); kJson without one.
  ToolCallFormat tool_call_format() const { return tool_call_format_; }

 private:
  Tokenizer tokenizer_;
  std::optional<ChatTemplate> template_;
  nlohmann::ordered_json template_vars_;  // bos_token, eos_token
  std::vector<int32_t> eos_;
  ToolCallFormat tool_call_format_ = ToolCallFormat::kJson;
  bool template_reads_reasoning_effort_ = false;  // the template names the variable
};

// Expands a tokenised rendering's image placeholders: `ids` holds one `image_pad` per image, in the
// order of `images` (the chat template writes <|vision_start|><|image_pad|><|vision_end|> per image
// part); each becomes its image's vision_tokens image_pads (grid_t·grid_h·grid_w / merge²). Each
// image is decoded (limits) and preprocessed (processor). Throws ProtocolError 400 when the count of
// image_pads is not the count of images (text that spells <|image_pad|> itself), and for an image the
// decoder or the processor refuses (413 for a bound), naming the image's part.
std::vector<PromptImage> expand_image_pads(std::vector<int32_t>& ids, int32_t image_pad,
                                           const std::vector<ImageInput>& images, const ImageRules& rules);

// The start of the assistant's turn that the request's tool_choice forces, in Qwen's tool-call format
// as the fuel's chat template renders an assistant's call ('<tool_call>\n{"name": "NAME", "arguments":
// ARGS}\n</tool_call>'): "required" opens a call up to its name, a named function up to its
// arguments. Empty for auto, none and completions. `reasoning_open`: the rendered prompt ends inside
// <think>; the opening then closes the reasoning first, so that the call is the answer.
// The prompt ends with this text (tokenised with it) and the output parser is primed with it: both
// derive it here, so they agree.
std::string forced_opening(const CompletionRequest& request, bool reasoning_open,
                           ToolCallFormat format = ToolCallFormat::kJson);

// The end-of-sequence ids of ENGINE_DIR/generation_config.json (none when the file is absent).
std::vector<int32_t> eos_token_ids(const std::string& engine_dir);

}  // namespace rocket
