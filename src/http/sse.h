// Server-sent events framing for streamed responses, as OpenAI streams them: one `data:` line per
// JSON object, a blank line after each, and a literal [DONE] last.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace rocket {

// "data: <json>\n\n". The JSON is compact and holds no raw newline (JSON escapes them in strings), so
// it is one SSE line. Non-ASCII is written as UTF-8; ill-formed UTF-8 in a string (none comes from
// StreamDecoder) becomes U+FFFD rather than failing mid-stream.
std::string sse_data(const nlohmann::ordered_json& payload);

// "event: <payload.type>\ndata: <json>\n\n": the Responses API names each event (and sends no [DONE]).
std::string sse_event(const nlohmann::ordered_json& payload);

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace rocket
