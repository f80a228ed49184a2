#include "template/jinja_lexer.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.h"
#include "template/jinja_text.h"

namespace rocket::jinja {

namespace {

// Jinja2 joins the source's lines with "\n" (so \r\n and \r become \n everywhere, string literals
// included) and, without keep_trailing_newline, drops one final newline.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') newlines_.push_back(i);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t tag = find_tag(pos);
      std::string data = src_.substr(pos, tag == std::string::npos ? std::string::npos : tag - pos);
      if (tag != std::string::npos) {
        const char kind = src_[tag + 1];
        const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
        if (modifier == '-') {
          data = py_strip(data, StripSide::kRight, nullptr);
        } else if (modifier != '+' && kind != '{') {
          lstrip_block(data, pos);
        }
      }
      if (!data.empty()) tokens_.push_back({TokenKind::kData, std::move(data), line_at(pos)});
      if (tag == std::string::npos) break;
      pos = src_[tag + 1] == '#' ? comment(tag) : tag_contents(tag);
    }
    tokens_.push_back({TokenKind::kEnd, "", line_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  int line_at(size_t pos) const {
    return 1 + int(std::lower_bound(newlines_.begin(), newlines_.end(), pos) - newlines_.begin());
  }

  [[noreturn]] void error(size_t pos, const std::string& what) const {
    fail("chat template line {}: {}", line_at(pos), what);
  }

  size_t find_tag(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // lstrip_blocks: drop the spaces and tabs (Python whitespace short of a newline) that stand alone
  // between the start of a line and a block or comment tag. `data_pos` is where `data` starts.
  void lstrip_block(std::string& data, size_t data_pos) const {
    const size_t nl = data.rfind('\n');
    const size_t line_start = nl == std::string::npos ? 0 : nl + 1;
    const bool at_line_start = line_start > 0 || data_pos == 0 || src_[data_pos - 1] == '\n';
    if (!at_line_start) return;
    const std::string_view tail = std::string_view(data).substr(line_start);
    for (char32_t cp : decode_utf8(tail)) {
      if (!is_py_space(cp) || cp == U'\n') return;
    }
    data.resize(line_start);
  }

  // After a tag: `-` strips all whitespace; otherwise trim_blocks drops one newline after a block or
  // comment unless the tag ends with `+`.
  size_t after_tag(size_t pos, char modifier, bool block_or_comment) const {
    if (modifier == '-') {
      const std::string rest = py_strip(std::string_view(src_).substr(pos), StripSide::kLeft, nullptr);
      return src_.size() - rest.size();
    }
    if (modifier != '+' && block_or_comment && pos < src_.size() && src_[pos] == '\n') return pos + 1;
    return pos;
  }

  size_t comment(size_t tag) {
    const size_t end = src_.find("#}", tag + 2);
    if (end == std::string::npos) error(tag, "unterminated comment: missing '#}'");
    const char modifier = end > tag + 2 ? src_[end - 1] : '\0';
    return after_tag(end + 2, modifier, true);
  }

  size_t tag_contents(size_t tag) {
    const bool block = src_[tag + 1] == '%';
    size_t pos = tag + 2;
    if (pos < src_.size() && (src_[pos] == '-' || src_[pos] == '+')) ++pos;
    tokens_.push_back({block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, block ? "{%" : "{{", line_at(tag)});
    if (block) refuse_raw(pos, tag);
    int depth = 0;
    while (true) {
      while (pos < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos]))) ++pos;
      if (pos >= src_.size()) error(tag, fmt::format("unterminated '{}' tag", block ? "{%" : "{{"));
      if (depth == 0) {
        const std::string_view rest = std::string_view(src_).substr(pos);
        const std::string_view close = block ? "%}" : "}}";
        for (const char modifier : {'-', '+', '\0'}) {
          if (modifier == '+' && !block) continue;
          const std::string end = modifier ? std::string(1, modifier) + std::string(close) : std::string(close);
          if (rest.substr(0, end.size()) == end) {
            tokens_.push_back({block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, std::string(close), line_at(pos)});
            return after_tag(pos + end.size(), modifier, block);
          }
        }
      }
      pos = token(pos, depth);
    }
  }

  // {% raw %} makes the lexer copy text verbatim; it is outside the subset, refused here with its name
  // rather than later as a confusing syntax error about its contents.
  void refuse_raw(size_t pos, size_t tag) const {
    while (pos < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos]))) ++pos;
    size_t end = pos;
    while (end < src_.size() && is_name_char(src_[end])) ++end;
    if (src_.compare(pos, end - pos, "raw") == 0 && end - pos == 3) {
      error(tag, "unsupported construct 'raw' (outside the Jinja subset chat templates are compiled with)");
    }
  }

  size_t token(size_t pos, int& depth) {
    const int line = line_at(pos);
    const char c = src_[pos];
    if (is_name_start(c)) {
      size_t end = pos;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      tokens_.push_back({TokenKind::kName, src_.substr(pos, end - pos), line});
      return end;
    }
    if (is_digit(c)) return number(pos);
    if (c == '\'' || c == '"') return string(pos);
    // Longest first, as Jinja2 matches them.
    static constexpr std::array<std::string_view, 26> kOperators = {
        "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
        ">",  "=",  ".",  ":",  "|",  ",",  "(", ")", "[", "]", "{", "}", ";"};
    for (const std::string_view op : kOperators) {
      if (std::string_view(src_).substr(pos, op.size()) == op) {
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) error(pos, fmt::format("unexpected '{}'", op));
          --depth;
        }
        tokens_.push_back({TokenKind::kOperator, std::string(op), line});
        return pos + op.size();
      }
    }
    error(pos, fmt::format("unexpected character '{}'", c));
  }

  size_t digits(size_t pos) const {
    while (pos < src_.size() && (is_digit(src_[pos]) || (src_[pos] == '_' && pos + 1 < src_.size() && is_digit(src_[pos + 1])))) ++pos;
    return pos;
  }

  size_t number(size_t pos) {
    const int line = line_at(pos);
    size_t end = digits(pos);
    bool is_float = false;
    // Jinja2 reads `x.0.1` as two integer subscripts, never as a float after a dot.
    const bool after_dot = !tokens_.empty() && tokens_.back().kind == TokenKind::kOperator && tokens_.back().text == ".";
    if (!after_dot) {
      if (end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
        end = digits(end + 1);
        is_float = true;
      }
      if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
        size_t exp = end + 1;
        if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
        if (exp < src_.size() && is_digit(src_[exp])) {
          end = digits(exp);
          is_float = true;
        }
      }
    }
    std::string text;
    for (size_t i = pos; i < end; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInteger, text, line});
    return end;
  }

  // Python's unicode-escape decoding, which Jinja2 applies to string literals: unknown escapes keep
  // their backslash.
  size_t string(size_t pos) {
    const int line = line_at(pos);
    const char quote = src_[pos];
    std::string out;
    size_t i = pos + 1;
    while (true) {
      if (i >= src_.size()) error(pos, "unterminated string literal");
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) error(pos, "unterminated string literal");
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const int h = i + k < src_.size() ? hex_value(src_[i + k]) : -1;
            if (h < 0) error(pos, fmt::format("truncated \\{} escape in a string literal", e));
            cp = cp * 16 + uint32_t(h);
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) error(pos, "escape names no Unicode scalar value");
          append_utf8(out, char32_t(cp));
          i += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = uint32_t(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k) cp = cp * 8 + uint32_t(src_[i++] - '0');
            append_utf8(out, char32_t(cp));
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back({TokenKind::kString, std::move(out), line});
    return i + 1;
  }

  std::string src_;
  std::vector<size_t> newlines_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace rocket::jinja
