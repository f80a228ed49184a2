#include "grammar/regex.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <vector>

#include "core/utf8.h"
#include "grammar/json_schema.h"
#include "grammar/schema_error.h"

namespace rocket::grammar {

namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

CodepointSet normalize(CodepointSet s) {
  std::sort(s.begin(), s.end());
  CodepointSet out;
  for (auto r : s) {
    if (!out.empty() && r.first <= out.back().second + 1) out.back().second = std::max(out.back().second, r.second);
    else out.push_back(r);
  }
  return out;
}

CodepointSet complement(const CodepointSet& s) {
  CodepointSet out;
  uint32_t next = 0;
  for (auto [lo, hi] : s) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.emplace_back(next, kMaxCodepoint);
  return out;
}

// A parsed pattern: a tree the compiler can instantiate more than once (bounded repetition).
struct Regex {
  enum class Kind { kSet, kConcat, kAlt, kRepeat } kind;
  CodepointSet set;
  std::vector<std::unique_ptr<Regex>> parts;
  int min = 0, max = -1;  // kRepeat; max -1 = unbounded
};

class Parser {
 public:
  Parser(std::string_view p, const std::string& path) : p_(p), path_(path) {}

  std::unique_ptr<Regex> parse(bool& anchored_start, bool& anchored_end) {
    anchored_start = !p_.empty() && p_[0] == '^';
    if (anchored_start) ++i_;
    std::unique_ptr<Regex> r = alternation();
    anchored_end = i_ < p_.size() && p_[i_] == '$';
    if (anchored_end) ++i_;
    if (i_ != p_.size()) fail(p_[i_] == ')' ? "an unmatched ')'" : fmt::format("'{}' here is not supported", p_[i_]));
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw SchemaError(path_, fmt::format("pattern: {} (at offset {})", what, i_));
  }
  bool at(char c) const { return i_ < p_.size() && p_[i_] == c; }

  std::unique_ptr<Regex> alternation() {
    auto alt = std::make_unique<Regex>(Regex{Regex::Kind::kAlt, {}, {}, 0, -1});
    alt->parts.push_back(concatenation());
    while (at('|')) {
      ++i_;
      alt->parts.push_back(concatenation());
    }
    if (alt->parts.size() == 1) return std::move(alt->parts[0]);
    return alt;
  }

  std::unique_ptr<Regex> concatenation() {
    auto cat = std::make_unique<Regex>(Regex{Regex::Kind::kConcat, {}, {}, 0, -1});
    while (i_ < p_.size() && !at('|') && !at(')')) {
      if (at('$') && i_ + 1 == p_.size()) break;
      cat->parts.push_back(repetition());
    }
    return cat;
  }

  std::unique_ptr<Regex> repetition() {
    std::unique_ptr<Regex> atom_ = atom();
    int lo, hi;
    if (at('*')) lo = 0, hi = -1, ++i_;
    else if (at('+')) lo = 1, hi = -1, ++i_;
    else if (at('?')) lo = 0, hi = 1, ++i_;
    else if (at('{') && braces(lo, hi)) {}
    else return atom_;
    if (at('?')) ++i_;  // lazy: the same strings
    // ECMA-262 (JSON Schema's regex dialect) has no quantifier on a quantifier: `a++`, `a*+`, `a{2}*`
    // are syntax errors there. Refusing them also keeps `X+` (built as X X*) from doubling per level.
    int lo2, hi2;
    if (at('*') || at('+') || at('?') || (at('{') && braces(lo2, hi2)))
      fail("a quantifier on a quantifier (ECMA-262 has no possessive or stacked quantifiers)");
    auto rep = std::make_unique<Regex>(Regex{Regex::Kind::kRepeat, {}, {}, lo, hi});
    rep->parts.push_back(std::move(atom_));
    return rep;
  }

  // {n}, {n,}, {n,m} at i_; false (nothing consumed) when the brace is a literal.
  bool braces(int& lo, int& hi) {
    size_t j = i_ + 1;
    auto number = [&](int& out) {
      const size_t start = j;
      int64_t v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && v <= kMaxCount) v = v * 10 + (p_[j++] - '0');
      if (j == start) return false;
      if (v > kMaxCount) fail(fmt::format("a repetition count above {} is not supported", kMaxCount));
      out = int(v);
      return true;
    };
    if (!number(lo)) return false;
    hi = lo;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      hi = -1;
      if (j < p_.size() && p_[j] != '}' && !number(hi)) return false;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    if (hi >= 0 && hi < lo) fail("a repetition {n,m} with m < n");
    i_ = j + 1;
    return true;
  }

  std::unique_ptr<Regex> set(CodepointSet s) {
    return std::make_unique<Regex>(Regex{Regex::Kind::kSet, normalize(std::move(s)), {}, 0, -1});
  }

  std::unique_ptr<Regex> atom() {
    if (i_ >= p_.size()) fail("a pattern that ends early");
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (at('?')) {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') i_ += 2;
        else fail("lookaround and named groups are not supported");
      }
      std::unique_ptr<Regex> r = alternation();
      if (!at(')')) fail("an unclosed '('");
      ++i_;
      return r;
    }
    if (c == '[') return set(bracket());
    if (c == '.') {
      ++i_;
      return set(complement(CodepointSet{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '\\') return set(escape(/*in_class=*/false));
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("a quantifier with nothing to repeat");
    if (c == '^' || c == '$') fail("anchors other than a leading ^ and a trailing $ are not supported");
    return set({literal()});
  }

  std::pair<uint32_t, uint32_t> literal() {
    const Utf8Scan sc = scan_utf8(p_, i_);
    i_ += sc.len;
    return {uint32_t(sc.cp), uint32_t(sc.cp)};
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (i_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[i_]))) fail("a malformed \\x or \\u escape");
      const char h = p_[i_];
      v = v * 16 + uint32_t(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  }

  CodepointSet escape(bool in_class) {
    ++i_;  // the backslash
    if (i_ >= p_.size()) fail("a pattern that ends in a backslash");
    const char c = p_[i_++];
    static const CodepointSet kDigit = {{'0', '9'}};
    static const CodepointSet kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    static const CodepointSet kSpace = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                        {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
    switch (c) {
      case 'd': return kDigit;
      case 'D': return complement(kDigit);
      case 'w': return kWord;
      case 'W': return complement(kWord);
      case 's': return kSpace;
      case 'S': return complement(kSpace);
      case 'n': return {{'\n', '\n'}};
      case 't': return {{'\t', '\t'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': { const uint32_t v = hex(2); return {{v, v}}; }
      case 'u': {
        const uint32_t v = hex(4);
        if (v >= 0xD800 && v <= 0xDFFF) fail("surrogate escapes are not supported");
        return {{v, v}};
      }
      default: break;
    }
    if (c == 'b' && in_class) return {{'\b', '\b'}};
    if (std::isalnum(static_cast<unsigned char>(c))) fail(fmt::format("the escape \\{} is not supported", c));
    return {{uint32_t(static_cast<unsigned char>(c)), uint32_t(static_cast<unsigned char>(c))}};
  }

  CodepointSet bracket() {
    ++i_;  // [
    const bool negate = at('^');
    if (negate) ++i_;
    CodepointSet s;
    bool first = true;
    while (i_ < p_.size() && (!at(']') || first)) {
      first = false;
      CodepointSet item = at('\\') ? escape(/*in_class=*/true) : CodepointSet{literal()};
      if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        const CodepointSet upper = at('\\') ? escape(true) : CodepointSet{literal()};
        if (item.size() != 1 || upper.size() != 1 || item[0].first != item[0].second || upper[0].first != upper[0].second)
          fail("a class range between character sets");
        if (upper[0].first < item[0].first) fail("a class range out of order");
        item = {{item[0].first, upper[0].first}};
      }
      s.insert(s.end(), item.begin(), item.end());
    }
    if (!at(']')) fail("an unclosed '['");
    ++i_;
    s = normalize(std::move(s));
    return negate ? complement(s) : s;
  }

  std::string_view p_;
  const std::string& path_;
  size_t i_ = 0;
};

// Surrogates cannot be written (JSON text is UTF-8 here); a set of only those matches nothing.
CodepointSet writable(const CodepointSet& s) {
  CodepointSet out;
  for (auto [lo, hi] : s) {
    if (lo < 0xD800) out.emplace_back(lo, std::min(hi, 0xD7FFu));
    if (hi > 0xDFFF) out.emplace_back(std::max(lo, 0xE000u), hi);
  }
  return out;
}

Fragment build(Fragments& f, const Regex& r, const std::string& path) {
  switch (r.kind) {
    case Regex::Kind::kSet: {
      const CodepointSet s = writable(r.set);
      if (s.empty()) throw SchemaError(path, "pattern: a character class that matches nothing");
      return f.json_char_of(s);
    }
    case Regex::Kind::kConcat: {
      Fragment out = f.empty();
      for (const auto& p : r.parts) out = f.seq(out, build(f, *p, path));
      return out;
    }
    case Regex::Kind::kAlt: {
      std::vector<Fragment> alts;
      for (const auto& p : r.parts) alts.push_back(build(f, *p, path));
      return f.choice(alts);
    }
    case Regex::Kind::kRepeat: {
      if (f.automaton().node_count() > kMaxNodes) throw SchemaError(path, "pattern: too large to compile");
      const Regex& body = *r.parts[0];
      Fragment out = f.empty();
      for (int k = 0; k < r.min; ++k) out = f.seq(out, build(f, body, path));
      if (r.max < 0) return f.seq(out, f.star(build(f, body, path)));
      Fragment rest = f.empty();  // nested optionals: one parse per prefix
      for (int k = r.min; k < r.max; ++k) rest = f.optional(f.seq(build(f, body, path), rest));
      return f.seq(out, rest);
    }
  }
  return f.empty();
}

}  // namespace

Fragment compile_pattern(Fragments& f, std::string_view pattern, const std::string& path) {
  bool start = false, end = false;
  const std::unique_ptr<Regex> r = Parser(pattern, path).parse(start, end);
  Fragment body = build(f, *r, path);
  if (!start) body = f.seq(f.star(f.json_char()), body);
  if (!end) body = f.seq(body, f.star(f.json_char()));
  return body;
}

}  // namespace rocket::grammar
