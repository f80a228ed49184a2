// Python `str` semantics on UTF-8 strings, for the chat-template engine (jinja_*.h).
//
// Chat templates are written for HF transformers, i.e. Python Jinja2, where a string is a sequence of
// code points: len(), indexing and slicing count code points, and strip()/split() use Python's
// whitespace set (str.isspace). These helpers give the same answers on UTF-8 bytes, read by
// core/utf8.h (decode_utf8, code_point_count, for_each_code_point). Input is assumed to be valid
// UTF-8 (it comes from JSON, which nlohmann validates, or from the template source); an ill-formed
// byte is a code point of its own rather than an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"

namespace rocket::jinja {

// Byte offset of each code point, plus a final entry equal to s.size(): code point i is
// s.substr(offsets[i], offsets[i + 1] - offsets[i]).
std::vector<size_t> code_point_offsets(std::string_view s);

// Python's str.isspace() for one code point (also what Jinja's `-` whitespace control strips).
bool is_py_space(char32_t cp);

// str.strip/lstrip/rstrip: `chars` empty-and-absent means Python whitespace; otherwise the set of
// code points in `chars`.
enum class StripSide { kBoth, kLeft, kRight };
std::string py_strip(std::string_view s, StripSide side, const std::string* chars);

// str.split(sep, maxsplit) and str.rsplit(...): sep == nullptr splits on runs of whitespace and drops
// empty ends; maxsplit < 0 means no limit. An empty sep is a RenderError (Python's ValueError).
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);

// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts between code points.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);

// Case mappings use utf8proc's simple (one code point to one) mappings plus Python's ß -> "SS"; Python
// applies the other full mappings too (e.g. "ﬁ".upper() is "FI" in Python, "ﬁ" here).
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);

// Python's repr() of a float ("1.0", "0.1", "1e+16", "inf", "nan") and of a str ('it''s' quoting,
// escapes for non-printable code points).
std::string py_float_repr(double v);
std::string py_str_repr(std::string_view s);

}  // namespace rocket::jinja
