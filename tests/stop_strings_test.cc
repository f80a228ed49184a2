// StopMatcher: stop strings never reach the output, however the text is cut into pieces, including
// pieces from the real tokenizer that split a stop string across tokens and inside multi-byte
// characters; text that is not a stop string is never lost or reordered.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "openai/stop_strings.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

#include "qwen_fixtures.h"

namespace rocket {
namespace {

using test::qwen;
using test::valid_utf8;

size_t char_len(uint8_t lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// What the client sees: the text before the first stop string, or all of it.
std::string expected_output(const std::string& text, const std::vector<std::string>& stops) {
  size_t first = std::string::npos;
  for (const std::string& s : stops) first = std::min(first, text.find(s));
  return text.substr(0, first);
}

struct Streamed {
  std::string output;
  bool stopped = false;
};

// Feeds `pieces`; checks after each that everything emitted so far is a prefix of `expected` (no
// stop string or part of one leaked and was taken back) and whole UTF-8.
Streamed feed(const std::vector<std::string>& pieces, const std::vector<std::string>& stops, const std::string& expected) {
  StopMatcher m(stops);
  Streamed s;
  for (const std::string& piece : pieces) {
    const StopMatcher::Result r = m.push(piece);
    EXPECT_TRUE(valid_utf8(r.text)) << r.text;
    s.output += r.text;
    EXPECT_EQ(expected.compare(0, s.output.size(), s.output), 0) << "emitted " << s.output;
    if (r.stopped) {
      s.stopped = true;
      return s;
    }
  }
  s.output += m.flush();
  return s;
}

// Every way of cutting `text` into two pieces at character boundaries, one character per piece, and
// the real tokenizer's tokens through StreamDecoder.
void check_all_cuts(const std::string& text, const std::vector<std::string>& stops) {
  SCOPED_TRACE(text);
  const std::string expected = expected_output(text, stops);
  const bool stops_expected = expected.size() < text.size();
  std::vector<size_t> bounds;
  for (size_t i = 0; i < text.size(); i += char_len(uint8_t(text[i]))) bounds.push_back(i);
  for (size_t cut : bounds) {
    const Streamed s = feed({text.substr(0, cut), text.substr(cut)}, stops, expected);
    EXPECT_EQ(s.output, expected) << "cut at " << cut;
    EXPECT_EQ(s.stopped, stops_expected);
  }
  std::vector<std::string> chars;
  for (size_t i = 0; i < bounds.size(); ++i) {
    chars.push_back(text.substr(bounds[i], (i + 1 < bounds.size() ? bounds[i + 1] : text.size()) - bounds[i]));
  }
  const Streamed by_char = feed(chars, stops, expected);
  EXPECT_EQ(by_char.output, expected);
  EXPECT_EQ(by_char.stopped, stops_expected);

  StreamDecoder decoder(qwen());
  std::vector<std::string> pieces;
  for (int32_t id : qwen().encode(text)) pieces.push_back(decoder.push(id));
  pieces.push_back(decoder.flush());
  const Streamed by_token = feed(pieces, stops, expected);
  EXPECT_EQ(by_token.output, expected);
  EXPECT_EQ(by_token.stopped, stops_expected);
}

TEST(StopMatcher, StopsBeforeTheStopString) {
  StopMatcher m({"END"});
  StopMatcher::Result r = m.push("hello E");
  EXPECT_EQ(r.text, "hello ");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.held(), 1u);
  r = m.push("N");
  EXPECT_EQ(r.text, "");
  r = m.push("D and more");
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("the EN").text, "the ");
  EXPECT_EQ(m.push("Dless").text, "");  // "ENDless" holds END: a stop
  StopMatcher n({"END"});
  EXPECT_EQ(n.push("the EN").text, "the ");
  EXPECT_EQ(n.push("d").text, "ENd");
  EXPECT_EQ(n.push(" E").text, " ");
  EXPECT_EQ(n.flush(), "E");  // the stream ended: the held tail was text after all
}

TEST(StopMatcher, EarliestStopWins) {
  StopMatcher m({"world", "lo w"});
  const StopMatcher::Result r = m.push("hello world");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "hel");
  EXPECT_EQ(m.matched(), "lo w");  // what Anthropic's stop_sequence reports
  StopMatcher tie({"ab", "a"});
  EXPECT_TRUE(tie.push("xab").stopped);
  EXPECT_EQ(tie.matched(), "ab");  // both start there: the first given
}

TEST(StopMatcher, NoStopsPassesEverything) {
  StopMatcher m({});
  EXPECT_EQ(m.push("<tool_call> 🐈").text, "<tool_call> 🐈");
  EXPECT_EQ(m.held(), 0u);
}

TEST(StopMatcher, NeverLeaksUnderAnyCut) {
  check_all_cuts("The answer is 42.\n\nObservation: done", {"Observation:"});
  check_all_cuts("世界和平 🕊️ 万岁", {"和平"});
  check_all_cuts("emoji stop 🛑 here", {"🛑"});
  check_all_cuts("partial 🛑 but the stop is 🛑🛑!", {"🛑🛑"});
  check_all_cuts("no stop here: Observ Obs 東京", {"Observation:", "東京タワー"});
  check_all_cuts("<think>\nhmm\n</think>\n\nAnswer</answer> tail", {"</answer>", "\n\n\n"});
  check_all_cuts("aaab", {"aab"});  // a stop string overlapping itself
  check_all_cuts("xyz abcabd", {"abd", "cab"});
}

TEST(StopMatcher, TokenSplitStopStringDoesNotLeak) {
  // "🛑" is two byte-level tokens in Qwen's vocabulary and " stop" a third: the stop string spans
  // tokens and begins inside a character.
  const std::vector<int32_t> ids = qwen().encode("go 🛑 stop now");
  StreamDecoder decoder(qwen());
  StopMatcher m({"🛑 stop"});
  std::string out;
  bool split_inside_char = false;
  int pieces_in_stop = 0;
  for (int32_t id : ids) {
    const std::string piece = decoder.push(id);
    split_inside_char |= decoder.pending_bytes() > 0;
    const StopMatcher::Result r = m.push(piece);
    out += r.text;
    EXPECT_EQ(out, std::string("go ").substr(0, out.size())) << "leaked";
    if (m.held() > 0 || r.stopped) ++pieces_in_stop;
    if (r.stopped) break;
  }
  EXPECT_TRUE(split_inside_char);
  EXPECT_GE(pieces_in_stop, 2) << "the stop string arrived in one piece; the test lost its point";
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(out, "go ");
}

}  // namespace
}  // namespace rocket
