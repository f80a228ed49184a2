// The streaming output side on arbitrary model output split at arbitrary points: the reasoning /
// tool-call parser and the stop-string matcher must give the same result however the text is split
// (they hold a tail that could begin a tag or a stop string), and never crash. Input: one byte of
// options, then the output; each 0xFF byte in it is a split point, not text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "openai/output_parser.h"
#include "openai/stop_strings.h"

namespace {

using rocket::OutputEvent;

// Events merged as a client sees them: consecutive deltas of one kind concatenated.
std::vector<OutputEvent> merged(const std::vector<OutputEvent>& events) {
  std::vector<OutputEvent> out;
  for (const OutputEvent& e : events) {
    if (!out.empty() && out.back().index() == e.index()) {
      if (auto* r = std::get_if<rocket::ReasoningDelta>(&out.back())) { r->text += std::get<rocket::ReasoningDelta>(e).text; continue; }
      if (auto* c = std::get_if<rocket::ContentDelta>(&out.back())) { c->text += std::get<rocket::ContentDelta>(e).text; continue; }
    }
    out.push_back(e);
  }
  return out;
}

bool same(const OutputEvent& a, const OutputEvent& b) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<rocket::ReasoningDelta>(&a)) return x->text == std::get<rocket::ReasoningDelta>(b).text;
  if (auto* x = std::get_if<rocket::ContentDelta>(&a)) return x->text == std::get<rocket::ContentDelta>(b).text;
  if (auto* x = std::get_if<rocket::ToolCallStart>(&a)) {
    const auto& y = std::get<rocket::ToolCallStart>(b);
    return x->index == y.index && x->name == y.name && x->id == y.id;
  }
  const auto& x = std::get<rocket::ToolCallArgumentsDelta>(a);
  const auto& y = std::get<rocket::ToolCallArgumentsDelta>(b);
  return x.index == y.index && x.fragment == y.fragment;
}

std::vector<OutputEvent> parse(const rocket::OutputParser::Options& o, const std::vector<std::string_view>& pieces) {
  rocket::OutputParser p(o, std::mt19937_64(7));
  std::vector<OutputEvent> all;
  for (std::string_view piece : pieces) {
    if (p.complete()) break;
    for (auto& e : p.push(piece)) all.push_back(std::move(e));
  }
  for (auto& e : p.finish()) all.push_back(std::move(e));
  return merged(all);
}

std::string stop(const std::vector<std::string_view>& pieces) {
  rocket::StopMatcher m({"</tool_call>", "\n\n\n", "STOP", "ab"});
  std::string out;
  for (std::string_view piece : pieces) {
    if (m.stopped()) break;
    out += m.push(piece).text;
  }
  if (!m.stopped()) out += m.flush();
  return out;
}

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "output_parser_fuzz: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  rocket::OutputParser::Options o;
  o.reasoning_open = data[0] & 1;
  o.tool_calls = data[0] & 2;
  o.max_tool_calls = data[0] & 4 ? 1 : 1 << 30;
  // The parser's input is whole UTF-8 (StreamDecoder's output); pieces here split it anywhere at an
  // 0xFF, which never occurs in UTF-8, so every piece is a run of the input's bytes.
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string whole;
  std::vector<std::string_view> pieces;
  std::vector<std::pair<size_t, size_t>> spans;
  size_t start = 0;
  for (size_t i = 0; i <= in.size(); ++i) {
    if (i == in.size() || uint8_t(in[i]) == 0xFF) {
      spans.push_back({whole.size(), i - start});
      whole.append(in.substr(start, i - start));
      start = i + 1;
    }
  }
  for (auto [at, n] : spans) pieces.push_back(std::string_view(whole).substr(at, n));
  const std::vector<OutputEvent> split = parse(o, pieces), one = parse(o, {whole});
  require(split.size() == one.size(), "event count depends on the split");
  for (size_t i = 0; i < one.size(); ++i) require(same(split[i], one[i]), "events depend on the split");
  require(stop(pieces) == stop({whole}), "stop-string output depends on the split");
  return 0;
}
