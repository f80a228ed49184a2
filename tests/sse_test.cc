// SSE framing and the OpenAI response objects: every frame is one `data:` line of valid JSON and
// UTF-8; a streamed chat response built from a real token-by-token parse reassembles into exactly the
// non-streamed message; usage, logprobs and completions objects have OpenAI's fields.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "http/sse.h"
#include "openai/openai_response.h"
#include "openai/output_parser.h"
#include "openai/protocol_error.h"
#include "openai/random_id.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

#include "qwen_fixtures.h"

namespace rocket {
namespace {

using Json = nlohmann::ordered_json;

using test::qwen;
using test::valid_utf8;

// The JSON of one SSE frame, after checking its framing.
Json frame_json(const std::string& frame) {
  EXPECT_TRUE(frame.starts_with("data: ")) << frame;
  EXPECT_TRUE(frame.ends_with("\n\n")) << frame;
  const std::string body = frame.substr(6, frame.size() - 8);
  EXPECT_EQ(body.find('\n'), std::string::npos) << "a frame is one line";
  EXPECT_TRUE(valid_utf8(frame));
  return Json::parse(body);  // throws (fails the test) on invalid JSON
}

ResponseMeta meta(bool stream_usage) {
  std::mt19937_64 rng(11);
  return {.id = random_id("chatcmpl-", 24, rng),
          .created = 1767225600,
          .model = "tiny",
          .system_fingerprint = "fp_tiny_bf16",
          .stream_usage = stream_usage};
}

TEST(Sse, Framing) {
  EXPECT_EQ(sse_data(Json{{"a", "b\nc"}}), "data: {\"a\":\"b\\nc\"}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  // Non-ASCII stays UTF-8 (not \u escapes), as OpenAI streams it.
  EXPECT_EQ(sse_data(Json{{"t", "東京 🗼"}}), "data: {\"t\":\"東京 🗼\"}\n\n");
  // Ill-formed UTF-8 cannot reach here from StreamDecoder, but must not throw mid-stream either.
  const std::string bad = sse_data(Json{{"t", std::string("a\xff" "b")}});
  EXPECT_EQ(frame_json(bad)["t"], "a\xEF\xBF\xBD" "b");
}

TEST(Sse, ErrorMidStream) {
  const Json j = frame_json(sse_data(error_body(ProtocolError(500, "engine stopped", "", "server_error"))));
  EXPECT_EQ(j["error"]["message"], "engine stopped");
  EXPECT_TRUE(j["error"]["param"].is_null());
}

// Streams `output` token by token through StreamDecoder and OutputParser into SSE frames, as the
// server does, and also assembles the non-streamed turn.
struct Stream {
  std::vector<std::string> frames;
  AssistantTurn turn;
  FinishReason finish = FinishReason::kStop;
};

Stream stream_chat(const std::string& output, const ResponseMeta& m, const Usage& usage) {
  Stream s;
  StreamDecoder decoder(qwen());
  OutputParser parser({}, std::mt19937_64(5));
  s.frames.push_back(sse_data(chat_chunk_json(m, chat_role_delta())));
  auto send = [&](const std::vector<OutputEvent>& events) {
    for (const OutputEvent& e : events) {
      s.turn.add(e);
      s.frames.push_back(sse_data(chat_chunk_json(m, chat_event_delta(e))));
    }
  };
  for (int32_t id : qwen().encode(output)) send(parser.push(decoder.push(id)));
  send(parser.push(decoder.flush()));
  send(parser.finish());
  s.finish = parser.tool_calls() > 0 ? FinishReason::kToolCalls : FinishReason::kStop;
  s.frames.push_back(sse_data(chat_chunk_json(m, Json::object(), s.finish)));
  if (m.stream_usage) s.frames.push_back(sse_data(chat_usage_chunk_json(m, usage)));
  s.frames.push_back(std::string(kSseDone));
  return s;
}

TEST(ChatStream, ReassemblesToTheNonStreamedMessage) {
  const std::string output =
      "<think>\nThe user wants 東京's weather 🌦️ and a joke 😀.\n</think>\n\nOne moment — 少々お待ちください.\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京\", \"days\": 2}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"tell_joke\", \"arguments\": {}}\n</tool_call>";
  const Usage usage{.prompt_tokens = 120, .completion_tokens = 64, .cached_tokens = 96};
  const ResponseMeta m = meta(/*stream_usage=*/true);
  const Stream s = stream_chat(output, m, usage);
  ASSERT_GE(s.frames.size(), 6u);
  EXPECT_EQ(s.frames.back(), kSseDone);

  // Reassemble the deltas as a client does.
  std::string content, reasoning;
  Json calls = Json::array();
  for (size_t i = 0; i + 1 < s.frames.size(); ++i) {
    const Json chunk = frame_json(s.frames[i]);
    EXPECT_EQ(chunk["id"], m.id);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["created"], m.created);
    EXPECT_EQ(chunk["model"], "tiny");
    EXPECT_EQ(chunk["system_fingerprint"], "fp_tiny_bf16");
    const bool usage_chunk = i + 2 == s.frames.size();
    if (usage_chunk) {
      EXPECT_TRUE(chunk["choices"].empty());
      EXPECT_EQ(chunk["usage"], usage_json(usage));
      continue;
    }
    EXPECT_TRUE(chunk["usage"].is_null()) << "every other chunk carries usage: null with include_usage";
    ASSERT_EQ(chunk["choices"].size(), 1u);
    const Json& choice = chunk["choices"][0];
    EXPECT_EQ(choice["index"], 0);
    EXPECT_TRUE(choice["logprobs"].is_null());
    const Json& delta = choice["delta"];
    if (i == 0) {
      EXPECT_EQ(delta, (Json{{"role", "assistant"}, {"content", ""}}));
    } else {
      EXPECT_FALSE(delta.contains("role"));
    }
    const bool last = i + 3 == s.frames.size();
    EXPECT_EQ(choice["finish_reason"], last ? Json("tool_calls") : Json()) << i;
    if (last) {
      EXPECT_TRUE(delta.empty());
    }
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      for (const Json& tc : delta["tool_calls"]) {
        const size_t index = tc["index"];
        if (tc.contains("id")) {
          ASSERT_EQ(index, calls.size()) << "a call starts with its id and name";
          EXPECT_EQ(tc["type"], "function");
          calls.push_back({{"id", tc["id"]}, {"type", "function"},
                           {"function", {{"name", tc["function"]["name"]}, {"arguments", ""}}}});
          EXPECT_EQ(tc["function"]["arguments"], "");
        } else {
          ASSERT_LT(index, calls.size());
          EXPECT_FALSE(tc["function"].contains("name"));
          calls[index]["function"]["arguments"] =
              calls[index]["function"]["arguments"].get<std::string>() + tc["function"]["arguments"].get<std::string>();
        }
      }
    }
  }

  const Json full = chat_completion_json(m, s.turn, s.finish, usage);
  EXPECT_EQ(full["object"], "chat.completion");
  EXPECT_EQ(full["id"], m.id);
  const Json& message = full["choices"][0]["message"];
  EXPECT_EQ(full["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["content"], content);
  EXPECT_EQ(message["content"], "One moment — 少々お待ちください.");
  EXPECT_EQ(message["reasoning_content"], reasoning);
  EXPECT_EQ(message["tool_calls"], calls);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(calls[0]["function"]["arguments"].get<std::string>()), (Json{{"city", "東京"}, {"days", 2}}));
  EXPECT_EQ(calls[1]["function"]["arguments"], "{}");
  EXPECT_TRUE(frame_json(sse_data(full)).is_object());
}

TEST(ChatStream, WithoutUsageOption) {
  const Stream s = stream_chat("Hi 👋", meta(/*stream_usage=*/false), {});
  // role, content deltas, finish, [DONE]: no usage chunk, and no usage member.
  ASSERT_GE(s.frames.size(), 4u);
  EXPECT_EQ(s.frames.back(), kSseDone);
  std::string content;
  for (size_t i = 0; i + 1 < s.frames.size(); ++i) {
    const Json chunk = frame_json(s.frames[i]);
    EXPECT_FALSE(chunk.contains("usage"));
    const Json& choice = chunk["choices"][0];
    if (i > 0 && i + 2 < s.frames.size()) content += choice["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(content, "Hi 👋");
  EXPECT_EQ(frame_json(s.frames[s.frames.size() - 2])["choices"][0]["finish_reason"], "stop");
}

TEST(ChatCompletion, Shapes) {
  const Usage usage{.prompt_tokens = 10, .completion_tokens = 5, .cached_tokens = 8};
  AssistantTurn turn;
  turn.content = "Hello!";
  const Json j = chat_completion_json(meta(false), turn, FinishReason::kLength, usage);
  EXPECT_EQ(j.dump(),
            Json::parse(R"({"id":")" + meta(false).id + R"(","object":"chat.completion","created":1767225600,)"
                        R"("model":"tiny","system_fingerprint":"fp_tiny_bf16","choices":[{"index":0,"message":)"
                        R"({"role":"assistant","content":"Hello!","refusal":null},"logprobs":null,)"
                        R"("finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":5,)"
                        R"("total_tokens":15,"prompt_tokens_details":{"cached_tokens":8}}})")
                .dump());
  // Tool calls and no content: content is null.
  AssistantTurn calls;
  calls.tool_calls.push_back({"call_x", "f", "{}"});
  const Json c = chat_completion_json(meta(false), calls, FinishReason::kToolCalls, usage);
  EXPECT_TRUE(c["choices"][0]["message"]["content"].is_null());
  EXPECT_FALSE(c["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_EQ(c["choices"][0]["message"]["tool_calls"][0],
            (Json{{"id", "call_x"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}));
  // No fingerprint: the member is omitted.
  ResponseMeta plain = meta(false);
  plain.system_fingerprint.clear();
  EXPECT_FALSE(chat_completion_json(plain, turn, FinishReason::kStop, usage).contains("system_fingerprint"));
}

TEST(Logprobs, ChatForm) {
  // A token that is the first two bytes of "🛑" (F0 9F 9B 91): not text on its own.
  const std::vector<TokenLogprob> tokens = {
      {.bytes = "Hello", .logprob = -0.25, .top = {{"Hello", -0.25}, {"Hi", -1.5}}},
      {.bytes = "\xF0\x9F", .logprob = -std::numeric_limits<double>::infinity(), .top = {}},
  };
  const Json j = chat_logprobs_json(tokens);
  EXPECT_TRUE(j["refusal"].is_null());
  ASSERT_EQ(j["content"].size(), 2u);
  EXPECT_EQ(j["content"][0], (Json{{"token", "Hello"},
                                   {"logprob", -0.25},
                                   {"bytes", {72, 101, 108, 108, 111}},
                                   {"top_logprobs",
                                    {{{"token", "Hello"}, {"logprob", -0.25}, {"bytes", {72, 101, 108, 108, 111}}},
                                     {{"token", "Hi"}, {"logprob", -1.5}, {"bytes", {72, 105}}}}}}));
  EXPECT_EQ(j["content"][1]["token"], "\xEF\xBF\xBD");  // U+FFFD
  EXPECT_EQ(j["content"][1]["bytes"], (Json{0xF0, 0x9F}));
  EXPECT_EQ(j["content"][1]["logprob"], -9999.0);
  EXPECT_TRUE(frame_json(sse_data(chat_chunk_json(meta(false), chat_event_delta(ContentDelta{"Hello"}), std::nullopt, j)))
                  ["choices"][0]["logprobs"]
                      .is_object());
}

TEST(Logprobs, CompletionForm) {
  const std::vector<TokenLogprob> tokens = {
      {.bytes = "東京", .logprob = -0.5, .top = {{"東京", -0.5}, {"大阪", -2.0}}},
      {.bytes = " is", .logprob = -0.1, .top = {{" is", -0.1}}},
  };
  int64_t offset = 3;
  const Json j = completion_logprobs_json(tokens, offset);
  EXPECT_EQ(j["tokens"], (Json{"東京", " is"}));
  EXPECT_EQ(j["token_logprobs"], (Json{-0.5, -0.1}));
  EXPECT_EQ(j["top_logprobs"][0], (Json{{"東京", -0.5}, {"大阪", -2.0}}));
  EXPECT_EQ(j["text_offset"], (Json{3, 5}));  // code points: 東京 is two
  EXPECT_EQ(offset, 8);
  // A sampled token outside the top alternatives is listed with them, as OpenAI lists it.
  const std::vector<TokenLogprob> unlikely = {{.bytes = " was", .logprob = -3.0, .top = {{" is", -0.1}}}};
  EXPECT_EQ(completion_logprobs_json(unlikely, offset)["top_logprobs"][0], (Json{{" is", -0.1}, {" was", -3.0}}));
}

TEST(TextCompletion, ObjectAndChunks) {
  const ResponseMeta m = meta(true);
  const Usage usage{.prompt_tokens = 3, .completion_tokens = 2, .cached_tokens = 0};
  const Json full = completion_json(m, " there", FinishReason::kStop, usage);
  EXPECT_EQ(full["object"], "text_completion");
  EXPECT_EQ(full["choices"][0], (Json{{"text", " there"}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", "stop"}}));
  EXPECT_EQ(full["usage"]["total_tokens"], 5);

  const Json chunk = frame_json(sse_data(completion_chunk_json(m, " 世界")));
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], " 世界");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunk["usage"].is_null());
  const Json last = frame_json(sse_data(completion_chunk_json(m, "", FinishReason::kLength)));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  const Json usage_chunk = frame_json(sse_data(completion_usage_chunk_json(m, usage)));
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(RandomId, FormAndDeterminism) {
  std::mt19937_64 a(3), b(3);
  const std::string id = tool_call_id(a);
  EXPECT_EQ(id, tool_call_id(b));
  ASSERT_EQ(id.size(), 29u);
  EXPECT_TRUE(id.starts_with("call_"));
  EXPECT_NE(tool_call_id(a), id);
}

}  // namespace
}  // namespace rocket
