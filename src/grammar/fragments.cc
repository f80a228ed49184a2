#include "grammar/fragments.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace rocket::grammar {

namespace {

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void utf8_encode(uint32_t cp, uint8_t* out) {
  switch (utf8_length(cp)) {
    case 1: out[0] = uint8_t(cp); break;
    case 2: out[0] = uint8_t(0xC0 | (cp >> 6)), out[1] = uint8_t(0x80 | (cp & 0x3F)); break;
    case 3:
      out[0] = uint8_t(0xE0 | (cp >> 12)), out[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F)), out[2] = uint8_t(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = uint8_t(0xF0 | (cp >> 18)), out[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
      out[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F)), out[3] = uint8_t(0x80 | (cp & 0x3F));
  }
}

// Splits [lo, hi] (one encoded length) until its encodings are a product of byte ranges: every
// continuation byte after the first differing one spans its full 0x80..0xBF.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  const int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  utf8_encode(lo, a);
  utf8_encode(hi, b);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

Fragment Fragments::empty() {
  const int32_t n = a_.add_node();
  return {n, n};
}

Fragment Fragments::bytes(uint8_t lo, uint8_t hi) {
  const Fragment f{a_.add_node(), a_.add_node()};
  a_.add_bytes(f.in, lo, hi, f.out);
  return f;
}

Fragment Fragments::literal(std::string_view text) {
  Fragment f = empty();
  for (char c : text) {
    const int32_t next = a_.add_node();
    a_.add_bytes(f.out, uint8_t(c), uint8_t(c), next);
    f.out = next;
  }
  return f;
}

Fragment Fragments::seq(Fragment a, Fragment b) {
  a_.add_eps(a.out, b.in);
  return {a.in, b.out};
}

Fragment Fragments::choice(const std::vector<Fragment>& alternatives) {
  const Fragment f{a_.add_node(), a_.add_node()};
  for (const Fragment& alt : alternatives) {
    a_.add_eps(f.in, alt.in);
    a_.add_eps(alt.out, f.out);
  }
  return f;
}

Fragment Fragments::optional(Fragment f) {
  a_.add_eps(f.in, f.out);
  return f;
}

Fragment Fragments::star(Fragment f) {
  const Fragment s{a_.add_node(), a_.add_node()};
  a_.add_eps(s.in, f.in);
  a_.add_eps(s.in, s.out);
  a_.add_eps(f.out, s.out);
  a_.add_eps(f.out, f.in);
  return s;
}

Fragment Fragments::call(int32_t rule) {
  const Fragment f{a_.add_node(), a_.add_node()};
  a_.add_call(f.in, rule, f.out);
  return f;
}

void Fragments::define(int32_t rule, Fragment body) {
  a_.add_eps(a_.rule_start(rule), body.in);
  a_.set_final(body.out);
}

Fragment Fragments::whitespace() {
  const Fragment f{a_.add_node(), a_.add_node()};
  a_.add_eps(f.in, f.out);
  a_.add_bytes(f.in, ' ', ' ', f.out);
  int32_t at = a_.add_node();
  a_.add_bytes(f.in, '\n', '\n', at);
  for (int i = 0; i < kIndent; ++i) {
    a_.add_eps(at, f.out);
    const int32_t next = a_.add_node();
    a_.add_bytes(at, ' ', ' ', next);
    at = next;
  }
  a_.add_eps(at, f.out);
  return f;
}

Fragment Fragments::without(const std::vector<std::string_view>& needles) {
  CHECK(!needles.empty(), "no needle to exclude");
  for (std::string_view n : needles) CHECK(!n.empty(), "an empty needle excludes every text");
  // States: the proper prefixes of the needles (an Aho-Corasick automaton built by brute force: the
  // needles are a few tags). State u on byte c goes to the longest suffix of u + c that is such a
  // prefix, unless u + c ends with a needle (excluded).
  std::vector<std::string> prefixes{""};
  for (std::string_view n : needles)
    for (size_t k = 1; k < n.size(); ++k)
      if (std::find(prefixes.begin(), prefixes.end(), n.substr(0, k)) == prefixes.end()) prefixes.emplace_back(n.substr(0, k));
  const Fragment f{a_.add_node(), a_.add_node()};
  std::vector<int32_t> state(prefixes.size());
  state[0] = f.in;
  for (size_t k = 1; k < prefixes.size(); ++k) state[k] = a_.add_node();
  for (size_t k = 0; k < prefixes.size(); ++k) {
    a_.add_eps(state[k], f.out);
    int32_t target[256];
    for (int c = 0; c < 256; ++c) {
      const std::string text = prefixes[k] + char(c);
      target[c] = -1;
      if (std::any_of(needles.begin(), needles.end(), [&](std::string_view n) { return text.ends_with(n); })) continue;
      for (size_t from = 0; from <= text.size(); ++from) {
        const auto it = std::find(prefixes.begin(), prefixes.end(), std::string_view(text).substr(from));
        if (it != prefixes.end()) {
          target[c] = state[size_t(it - prefixes.begin())];
          break;
        }
      }
    }
    // Runs of bytes with one target become one edge.
    for (int c = 0; c < 256;) {
      int e = c;
      while (e + 1 < 256 && target[e + 1] == target[c]) ++e;
      if (target[c] >= 0) a_.add_bytes(state[k], uint8_t(c), uint8_t(e), target[c]);
      c = e + 1;
    }
  }
  return f;
}

Fragment Fragments::utf8_range(uint32_t lo, uint32_t hi) {
  const Fragment f{a_.add_node(), a_.add_node()};
  // Cut at the encoded-length boundaries and around the surrogates.
  static constexpr uint32_t kCuts[][2] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (const auto& cut : kCuts) {
    const uint32_t a = std::max(lo, cut[0]), b = std::min(hi, cut[1]);
    if (a <= b) utf8_sequences(a, b, seqs);
  }
  for (const auto& seq : seqs) {
    int32_t at = f.in;
    for (size_t i = 0; i < seq.size(); ++i) {
      const int32_t next = i + 1 == seq.size() ? f.out : a_.add_node();
      a_.add_bytes(at, seq[i].first, seq[i].second, next);
      at = next;
    }
  }
  return f;
}

Fragment Fragments::json_char(std::string_view excluded) {
  const Fragment f{a_.add_node(), a_.add_node()};
  // Raw ASCII: 0x20..0x7F but the quote, the backslash and `excluded`, in runs.
  auto raw = [&](int c) { return c != '"' && c != '\\' && excluded.find(char(c)) == std::string_view::npos; };
  for (int c = 0x20; c <= 0x7F; ++c) {
    if (!raw(c)) continue;
    int e = c;
    while (e + 1 <= 0x7F && raw(e + 1)) ++e;
    a_.add_bytes(f.in, uint8_t(c), uint8_t(e), f.out);
    c = e;
  }
  const Fragment wide = utf8_range(0x80, 0x10FFFF);
  a_.add_eps(f.in, wide.in);
  a_.add_eps(wide.out, f.out);
  const int32_t esc = a_.add_node();
  a_.add_bytes(f.in, '\\', '\\', esc);
  for (char c : std::string_view("\"\\/bfnrt")) a_.add_bytes(esc, uint8_t(c), uint8_t(c), f.out);
  // \uXXXX below D800 or from E000: a first digit d/D takes 0-7 next.
  const int32_t u1 = a_.add_node(), low = a_.add_node(), u2 = a_.add_node(), u3 = a_.add_node(), u4 = a_.add_node();
  a_.add_bytes(esc, 'u', 'u', u1);
  auto hex = [&](int32_t from, int32_t to) {
    a_.add_bytes(from, '0', '9', to);
    a_.add_bytes(from, 'a', 'f', to);
    a_.add_bytes(from, 'A', 'F', to);
  };
  a_.add_bytes(u1, '0', '9', u2);
  a_.add_bytes(u1, 'a', 'c', u2);
  a_.add_bytes(u1, 'A', 'C', u2);
  a_.add_bytes(u1, 'e', 'f', u2);
  a_.add_bytes(u1, 'E', 'F', u2);
  a_.add_bytes(u1, 'd', 'd', low);
  a_.add_bytes(u1, 'D', 'D', low);
  a_.add_bytes(low, '0', '7', u3);
  hex(u2, u3);
  hex(u3, u4);
  hex(u4, f.out);
  return f;
}

Fragment Fragments::json_char_of(const CodepointSet& set) {
  CHECK(!set.empty(), "a character class with no character");
  const Fragment f{a_.add_node(), a_.add_node()};
  auto link = [&](Fragment g) {
    a_.add_eps(f.in, g.in);
    a_.add_eps(g.out, f.out);
  };
  for (auto [lo, hi] : set) {
    // Control characters, the quote and the backslash are escaped; the rest is raw UTF-8.
    for (uint32_t c = lo; c <= std::min(hi, 0x7Fu); ++c) {
      if (c >= 0x20 && c != '"' && c != '\\') {
        uint32_t run = c;
        while (run + 1 <= std::min(hi, 0x7Fu) && run + 1 != '"' && run + 1 != '\\') ++run;
        a_.add_bytes(f.in, uint8_t(c), uint8_t(run), f.out);
        c = run;
        continue;
      }
      static constexpr const char* kShort[] = {"\\b", "\\t", "\\n", nullptr, "\\f", "\\r"};
      std::string text;
      if (c == '"') text = "\\\"";
      else if (c == '\\') text = "\\\\";
      else if (c >= 8 && c <= 13 && kShort[c - 8]) text = kShort[c - 8];
      else text = fmt::format("\\u{:04x}", c);
      link(literal(text));
    }
    if (hi >= 0x80) link(utf8_range(std::max(lo, 0x80u), hi));
  }
  return f;
}

}  // namespace rocket::grammar
