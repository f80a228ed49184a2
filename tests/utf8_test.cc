// core/utf8.h: well-formed UTF-8 by Unicode's Table 3-7, and the maximal-subpart reading of what is
// not: overlong forms, surrogates, code points above U+10FFFF, stray continuation bytes and sequences
// cut short, each checked against what Python's errors="replace" (and Rust's from_utf8_lossy) give.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/utf8.h"

namespace rocket {
namespace {

std::string lossy(std::string_view s) {
  std::string out;
  EXPECT_EQ(append_utf8_lossy(s, out, /*final=*/true), s.size());
  return out;
}

const std::string kR = "\xEF\xBF\xBD";  // U+FFFD

TEST(Utf8, EncodesAndDecodesEveryLengthAtItsBoundaries) {
  for (const char32_t cp : {U'\0', U'\x7F', U'\x80', U'\x7FF', U'\x800', U'\xD7FF', U'\xE000', U'\xFFFD', U'\xFFFF',
                            U'\x10000', U'\x10FFFF'}) {
    std::string s;
    append_utf8(s, cp);
    const size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    ASSERT_EQ(s.size(), want) << std::hex << uint32_t(cp);
    const Utf8Scan sc = scan_utf8(s, 0);
    EXPECT_EQ(sc.kind, Utf8::kValid) << std::hex << uint32_t(cp);
    EXPECT_EQ(sc.len, want);
    EXPECT_EQ(sc.cp, cp);
    EXPECT_TRUE(is_valid_utf8(s));
    EXPECT_EQ(lossy(s), s);
    EXPECT_EQ(decode_utf8(s), std::vector<char32_t>{cp});
  }
}

TEST(Utf8, RefusesOverlongForms) {
  // NUL and '/' spelt long, and the largest overlong of each length.
  for (const std::string_view s : {"\xC0\x80", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xF0\x80\x80\x80",
                                   "\xF0\x8F\xBF\xBF"}) {
    EXPECT_FALSE(is_valid_utf8(s)) << s.size();
    // C0, C1 never begin a sequence; E0 and F0 do, but not with that second byte: every byte is a
    // maximal subpart of its own.
    EXPECT_EQ(scan_utf8(s, 0).kind, Utf8::kInvalid);
    EXPECT_EQ(scan_utf8(s, 0).len, 1u);
    std::string want;
    for (size_t i = 0; i < s.size(); ++i) want += kR;
    EXPECT_EQ(lossy(s), want);
  }
}

TEST(Utf8, RefusesSurrogatesAndCodePointsAboveTheLast) {
  for (const std::string_view s : {"\xED\xA0\x80", "\xED\xBF\xBF", "\xED\xB0\x80", "\xF4\x90\x80\x80", "\xF7\xBF\xBF\xBF"}) {
    EXPECT_FALSE(is_valid_utf8(s));
    std::string want;
    for (size_t i = 0; i < s.size(); ++i) want += kR;
    EXPECT_EQ(lossy(s), want);
  }
  // The last code points before and after the surrogate block are fine.
  EXPECT_TRUE(is_valid_utf8("\xED\x9F\xBF\xEE\x80\x80"));
  // A CESU-8 pair (a surrogate pair spelt as two 3-byte sequences) is six errors, not one character.
  EXPECT_EQ(lossy("\xED\xA0\xBD\xED\xB8\x80"), kR + kR + kR + kR + kR + kR);
}

TEST(Utf8, CutsTruncatedSequencesAtTheirMaximalSubpart) {
  // A well-formed prefix cut short is one U+FFFD however long it was.
  EXPECT_EQ(lossy("a\xE2\x82"), "a" + kR);
  EXPECT_EQ(lossy("\xF0\x9F\x98" "b"), kR + "b");
  EXPECT_EQ(lossy("\xF0\x9F" "b"), kR + "b");
  EXPECT_EQ(scan_utf8("\xF0\x9F\x98", 0).kind, Utf8::kTruncated);
  EXPECT_EQ(scan_utf8("\xF0\x9F\x98", 0).len, 3u);
  EXPECT_EQ(scan_utf8("\xF0\x9F\x98" "b", 0).kind, Utf8::kInvalid);
  EXPECT_EQ(scan_utf8("\xF0\x9F\x98" "b", 0).len, 3u);
  // Unicode's own example (section 3.9, U+FFFD substitution of maximal subparts).
  EXPECT_EQ(lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + kR + kR + kR + "b" + kR + "c" + kR + kR + "d");
  // Stray continuation bytes and bytes that never occur.
  EXPECT_EQ(lossy("\x80\xBF\xFE\xFF"), kR + kR + kR + kR);
}

TEST(Utf8, NotFinalKeepsAnIncompleteTailForTheNextBytes) {
  std::string out;
  EXPECT_EQ(append_utf8_lossy("ab\xE2\x82", out, /*final=*/false), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(append_utf8_lossy("\xE2\x82\xAC", out, /*final=*/false), 3u);
  EXPECT_EQ(out, "\xE2\x82\xAC");
  // What can no longer complete is replaced at once.
  out.clear();
  EXPECT_EQ(append_utf8_lossy("\xE2\x82" "c\xC0", out, /*final=*/false), 4u);
  EXPECT_EQ(out, kR + "c" + kR);
}

TEST(Utf8, CodePointReadersKeepEveryIllFormedByte) {
  // For the template engine's Python strings: an ill-formed byte is one code point, its byte value,
  // and the well-formed text around it is read as usual.
  std::vector<std::pair<size_t, size_t>> spans;
  std::vector<char32_t> cps;
  for_each_code_point("\xC3\xA9\xC0\x80" "z\xE2\x82", [&](char32_t cp, size_t pos, size_t len) {
    cps.push_back(cp);
    spans.emplace_back(pos, len);
  });
  EXPECT_EQ(cps, (std::vector<char32_t>{U'\xE9', U'\xC0', U'\x80', U'z', U'\xE2', U'\x82'}));
  EXPECT_EQ(spans, (std::vector<std::pair<size_t, size_t>>{{0, 2}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}));
  EXPECT_EQ(code_point_count("\xC3\xA9\xC0\x80" "z\xE2\x82"), 6u);
  EXPECT_EQ(code_point_count("h\xC3\xA9llo \xF0\x9F\x98\x80"), 7u);
  EXPECT_EQ(decode_utf8("\xED\xA0\x80"), (std::vector<char32_t>{U'\xED', U'\xA0', U'\x80'}));
}

}  // namespace
}  // namespace rocket
