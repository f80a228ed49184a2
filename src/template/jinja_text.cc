#include "template/jinja_text.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "template/jinja_error.h"

namespace rocket::jinja {

namespace {

bool in_set(char32_t cp, const std::vector<char32_t>& set) {
  for (char32_t c : set) {
    if (c == cp) return true;
  }
  return false;
}

std::string map_code_points(std::string_view s, utf8proc_int32_t (*f)(utf8proc_int32_t)) {
  std::string out;
  out.reserve(s.size());
  for_each_code_point(s, [&](char32_t cp, size_t, size_t) { append_utf8(out, char32_t(f(utf8proc_int32_t(cp)))); });
  return out;
}

bool is_upper_or_title(char32_t cp) {
  const auto cat = utf8proc_category(utf8proc_int32_t(cp));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT;
}

bool is_lower(char32_t cp) { return utf8proc_category(utf8proc_int32_t(cp)) == UTF8PROC_CATEGORY_LL; }

// Python's str.isprintable() for one code point: everything but the "Other" and "Separator"
// categories, except the ASCII space.
bool is_printable(char32_t cp) {
  if (cp == U' ') return true;
  switch (utf8proc_category(utf8proc_int32_t(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for_each_code_point(s, [&](char32_t, size_t pos, size_t) { offsets.push_back(pos); });
  offsets.push_back(s.size());
  return offsets;
}

bool is_py_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

std::string py_strip(std::string_view s, StripSide side, const std::string* chars) {
  const std::vector<char32_t> set = chars ? decode_utf8(*chars) : std::vector<char32_t>{};
  const auto strippable = [&](char32_t cp) { return chars ? in_set(cp, set) : is_py_space(cp); };
  const std::vector<size_t> offsets = code_point_offsets(s);
  const std::vector<char32_t> cps = decode_utf8(s);
  size_t begin = 0, end = cps.size();
  if (side != StripSide::kRight) {
    while (begin < end && strippable(cps[begin])) ++begin;
  }
  if (side != StripSide::kLeft) {
    while (end > begin && strippable(cps[end - 1])) --end;
  }
  return std::string(s.substr(offsets[begin], offsets[end] - offsets[begin]));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) render_fail("empty separator");
    size_t start = 0;
    while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
      const size_t hit = s.find(*sep, start);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, hit - start));
      start = hit + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::vector<size_t> offsets = code_point_offsets(s);
  const std::vector<char32_t> cps = decode_utf8(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && is_py_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
      // The rest, trailing whitespace included, is the last part (Python keeps it).
      parts.emplace_back(s.substr(offsets[i]));
      break;
    }
    const size_t word = i;
    while (i < cps.size() && !is_py_space(cps[i])) ++i;
    parts.emplace_back(s.substr(offsets[word], offsets[i] - offsets[word]));
  }
  return parts;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) render_fail("empty separator");
    size_t end = s.size();
    while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    parts.emplace_back(s.substr(0, end));
  } else {
    const std::vector<size_t> offsets = code_point_offsets(s);
    const std::vector<char32_t> cps = decode_utf8(s);
    size_t i = cps.size();
    while (true) {
      while (i > 0 && is_py_space(cps[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
        parts.emplace_back(s.substr(0, offsets[i]));
        break;
      }
      const size_t word_end = i;
      while (i > 0 && !is_py_space(cps[i - 1])) --i;
      parts.emplace_back(s.substr(offsets[i], offsets[word_end] - offsets[i]));
    }
  }
  return {parts.rbegin(), parts.rend()};
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    const std::vector<size_t> offsets = code_point_offsets(s);
    int64_t done = 0;
    // Python inserts `repl` before every code point and once at the end: len(s) + 1 places.
    for (size_t i = 0; i < offsets.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i + 1 < offsets.size()) out += s.substr(offsets[i], offsets[i + 1] - offsets[i]);
    }
    return out;
  }
  size_t start = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    const size_t hit = s.find(old, start);
    if (hit == std::string_view::npos) break;
    out += s.substr(start, hit - start);
    out += repl;
    start = hit + old.size();
  }
  out += s.substr(start);
  return out;
}

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for_each_code_point(s, [&](char32_t cp, size_t, size_t) {
    // utf8proc maps ß to the capital ẞ; Python's full mapping gives "SS", the one special case worth
    // having for the languages chat templates see.
    if (cp == 0xDF) {
      out += "SS";
    } else {
      append_utf8(out, char32_t(utf8proc_toupper(utf8proc_int32_t(cp))));
    }
  });
  return out;
}

std::string py_lower(std::string_view s) { return map_code_points(s, utf8proc_tolower); }

std::string py_title(std::string_view s) {
  std::string out;
  bool previous_is_cased = false;
  for_each_code_point(s, [&](char32_t cp, size_t, size_t) {
    if (is_upper_or_title(cp)) {
      if (previous_is_cased) cp = char32_t(utf8proc_tolower(utf8proc_int32_t(cp)));
      previous_is_cased = true;
    } else if (is_lower(cp)) {
      if (!previous_is_cased) cp = char32_t(utf8proc_totitle(utf8proc_int32_t(cp)));
      previous_is_cased = true;
    } else {
      previous_is_cased = false;
    }
    append_utf8(out, cp);
  });
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for_each_code_point(s, [&](char32_t cp, size_t, size_t) {
    append_utf8(out, char32_t(first ? utf8proc_totitle(utf8proc_int32_t(cp)) : utf8proc_tolower(utf8proc_int32_t(cp))));
    first = false;
  });
  return out;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, as Python's repr uses; only the layout differs from to_chars'.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exp = std::atoi(sci.c_str() + e + 1);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
    return out;
  }
  if (exp < 0) {
    out += "0." + std::string(size_t(-exp - 1), '0') + digits;
  } else if (size_t(exp) + 1 >= digits.size()) {
    out += digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
  }
  return out;
}

std::string py_str_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for_each_code_point(s, [&](char32_t cp, size_t pos, size_t len) {
    if (cp == char32_t(quote) || cp == U'\\') {
      out += '\\';
      out += char(cp);
    } else if (cp == U'\t') {
      out += "\\t";
    } else if (cp == U'\n') {
      out += "\\n";
    } else if (cp == U'\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      out += fmt::format("\\x{:02x}", uint32_t(cp));
    } else if (cp < 0x7F || is_printable(cp)) {
      out += s.substr(pos, len);
    } else if (cp <= 0xFF) {
      out += fmt::format("\\x{:02x}", uint32_t(cp));
    } else if (cp <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", uint32_t(cp));
    } else {
      out += fmt::format("\\U{:08x}", uint32_t(cp));
    }
  });
  out += quote;
  return out;
}

}  // namespace rocket::jinja
