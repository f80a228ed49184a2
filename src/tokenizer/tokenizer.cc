#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utf8proc.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "core/json_number.h"
#include "core/mapped_file.h"
#include "core/utf8.h"

namespace rocket {

namespace {

using nlohmann::json;

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (uint8_t(c) >= 0x80) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------------
// Byte-level alphabet

// GPT-2's bijection from bytes to printable code points: printable Latin-1 bytes map to themselves,
// the other 68 (controls, space, 0x7F-0xA0, 0xAD) to U+0100.. in byte order. Vocabulary entries are
// spelled in this alphabet, so "Ġ" (U+0120) is the space byte.
std::array<uint32_t, 256> byte_to_code_point() {
  std::array<uint32_t, 256> map{};
  uint32_t extra = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    map[b] = printable ? b : 256 + extra++;
  }
  return map;
}

// The bytes a vocabulary entry stands for, as HF's ByteLevel decoder computes them: every code point
// mapped back through the alphabet, or, if any is outside it (possible only for added tokens), the
// entry's own UTF-8.
// `code_point_to_byte` is indexed by code point (the alphabet ends at U+0143); -1 = not in it.
std::string token_bytes_of(const std::string& text, const std::vector<int16_t>& code_point_to_byte) {
  std::string bytes;
  for (size_t i = 0; i < text.size();) {
    const Utf8Scan sc = scan_utf8(text, i);
    i += sc.len;
    const char32_t cp = sc.cp;  // U+FFFD, outside the alphabet, for an ill-formed entry
    if (cp >= code_point_to_byte.size() || code_point_to_byte[cp] < 0) return text;
    bytes += char(code_point_to_byte[cp]);
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------------
// Configuration parsing

const json& field(const json& obj, const char* key, const std::string& where, const std::string& origin) {
  if (!obj.is_object()) fail("{}: {} is not an object", origin, where);
  auto it = obj.find(key);
  if (it == obj.end()) fail("{}: {} has no \"{}\"", origin, where, key);
  return *it;
}

bool flag(const json& obj, const char* key, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  return it->get<bool>();
}

bool empty_or_null(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty());
}

// HF runs its Split regexes with Oniguruma, whose \s under Unicode is the White_Space property (it
// includes U+0085 and excludes U+FEFF). PCRE2's \s under UCP is the Z categories plus controls, which
// lacks U+0085, so \s and \S are spelled as the property. Other constructs used by tokenizer.json
// patterns (\p{L}, \p{N}, (?i:...), lookahead) mean the same in both.
std::string onig_to_pcre2(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 's') {
        out += "\\p{White_Space}";
      } else if (c == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += '\\';
        out += c;
      }
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// The split ByteLevel does itself when use_regex is true (GPT-2's pattern).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---------------------------------------------------------------------------------------------------
// Per-thread PCRE2 scratch

// Match data and a JIT stack are per call in PCRE2's API; keeping one set per thread makes a match
// cost no allocation while leaving Tokenizer free of locks on this path. Neither depends on the
// pattern (one ovector pair suffices: only the whole match is read).
struct PcreScratch {
  pcre2_match_data* match = pcre2_match_data_create(1, nullptr);
  // NOTE: the JIT's default 32 KiB machine stack is enough for these patterns on ordinary text, but
  // lookahead after a long whitespace run can need more; 8 MiB covers megabyte-long runs.
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  PcreScratch() {
    CHECK(match && stack && context, "PCRE2 out of memory");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~PcreScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(match);
  }
  PcreScratch(const PcreScratch&) = delete;
  PcreScratch& operator=(const PcreScratch&) = delete;
};

PcreScratch& pcre_scratch() {
  thread_local PcreScratch scratch;
  return scratch;
}

constexpr size_t kMaxCachedPieceBytes = 256;  // longer pieces rarely repeat

}  // namespace

struct Tokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

// Pieces repeat heavily (words, indentation), and a hit skips BPE entirely. The cache is direct-mapped
// with slots overwritten in place: a steady state makes no allocation (a node-based map's inserts and
// evictions cost more than the BPE they save on novel text), and striped locks let threads encode
// concurrently.
struct Tokenizer::Cache {
  static constexpr size_t kSlots = 1 << 15, kStripes = 64;
  struct Slot {
    std::string piece;  // empty: unused (pieces are never empty)
    std::vector<int32_t> ids;
  };
  std::array<std::mutex, kStripes> locks;
  std::vector<Slot> slots = std::vector<Slot>(kSlots);
};

Tokenizer::Tokenizer() : cache_(std::make_unique<Cache>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& tokenizer_json_path) {
  MappedFile file(tokenizer_json_path);
  json doc;
  try {
    doc = json::parse(file.data(), file.data() + file.size());
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", tokenizer_json_path, e.what());
  }
  return from_json(doc, tokenizer_json_path);
}

Tokenizer Tokenizer::from_json(const json& doc, const std::string& origin) {
  Tokenizer t;
  try {
    // --- model
    const json& model = field(doc, "model", "the document", origin);
    if (model.contains("type") && model["type"] != "BPE")
      fail("{}: model.type is {}, only BPE is supported", origin, model["type"].dump());
    if (model.contains("dropout") && !model["dropout"].is_null())
      fail("{}: model.dropout is set; BPE dropout is a training feature and is not supported", origin);
    if (flag(model, "byte_fallback", false)) fail("{}: model.byte_fallback is not supported", origin);
    if (!empty_or_null(model, "continuing_subword_prefix") || !empty_or_null(model, "end_of_word_suffix"))
      fail("{}: model.continuing_subword_prefix / end_of_word_suffix are not supported", origin);
    const bool ignore_merges = flag(model, "ignore_merges", false);

    const json& vocab = field(model, "vocab", "model", origin);
    if (!vocab.is_object()) fail("{}: model.vocab is not an object", origin);
    int32_t max_id = -1;
    for (const auto& [text, id] : vocab.items()) max_id = std::max(max_id, json_number<int32_t>(id));
    const json& added = doc.contains("added_tokens") ? doc["added_tokens"] : json::array();
    if (!added.is_array()) fail("{}: added_tokens is not an array", origin);
    for (const json& a : added) max_id = std::max(max_id, json_number<int32_t>(field(a, "id", "an added token", origin)));
    if (max_id < 0) fail("{}: model.vocab is empty", origin);
    if (max_id >= (1 << 24)) fail("{}: token id {} is implausibly large", origin, max_id);

    t.id_text_.assign(size_t(max_id) + 1, std::string());
    t.id_special_.assign(size_t(max_id) + 1, 0);
    auto define = [&](const std::string& text, int32_t id, const char* what) {
      if (id < 0) fail("{}: {} \"{}\" has negative id {}", origin, what, text, id);
      if (text.empty()) fail("{}: {} with id {} is empty", origin, what, id);
      std::string& slot = t.id_text_[size_t(id)];
      if (!slot.empty() && slot != text)
        fail("{}: id {} names both \"{}\" and \"{}\"", origin, id, slot, text);
      auto [it, fresh] = t.text_to_id_.emplace(text, id);
      if (!fresh && it->second != id)
        fail("{}: {} \"{}\" has id {} but the vocabulary gives it {}", origin, what, text, id, it->second);
      slot = text;
    };
    t.text_to_id_.reserve(vocab.size() + added.size());
    for (const auto& [text, id] : vocab.items()) define(text, json_number<int32_t>(id), "token");

    // --- byte-level alphabet
    const std::array<uint32_t, 256> alphabet = byte_to_code_point();
    std::vector<int16_t> code_point_to_byte(*std::max_element(alphabet.begin(), alphabet.end()) + 1, -1);
    for (uint32_t b = 0; b < 256; ++b) {
      code_point_to_byte[alphabet[b]] = int16_t(b);
      std::string ch;
      append_utf8(ch, char32_t(alphabet[b]));
      t.byte_text_[b] = ch;
      auto it = t.text_to_id_.find(ch);
      if (it == t.text_to_id_.end())
        fail("{}: the vocabulary lacks the byte-level token \"{}\" for byte 0x{:02X}; not a byte-level BPE",
             origin, ch, b);
      t.byte_id_[b] = it->second;
    }

    // --- merges: "a b" strings (tokenizers < 0.20) or ["a", "b"] pairs; a later duplicate wins, as in HF
    const json& merges = field(model, "merges", "model", origin);
    if (!merges.is_array()) fail("{}: model.merges is not an array", origin);
    size_t slots = 16;
    while (slots * 3 < merges.size() * 5) slots *= 2;  // load <= 0.6: 4 MiB for Qwen's 151k merges
    t.merge_slots_.assign(slots, MergeSlot{});
    t.merge_mask_ = slots - 1;
    t.merge_shift_ = 64 - std::countr_zero(slots);
    std::string left, right, both;
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const json& m = merges[rank];
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
          fail("{}: model.merges[{}] \"{}\" is not two tokens separated by one space", origin, rank, s);
        left = s.substr(0, space), right = s.substr(space + 1);
      } else if (m.is_array() && m.size() == 2) {
        left = m[0].get_ref<const std::string&>(), right = m[1].get_ref<const std::string&>();
      } else {
        fail("{}: model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", origin, rank);
      }
      both.assign(left).append(right);
      auto l = t.text_to_id_.find(left), r = t.text_to_id_.find(right), lr = t.text_to_id_.find(both);
      if (l == t.text_to_id_.end() || r == t.text_to_id_.end() || lr == t.text_to_id_.end())
        fail("{}: model.merges[{}] (\"{}\", \"{}\") uses or makes a token not in the vocabulary", origin, rank,
             left, right);
      const uint64_t key = pair_key(l->second, r->second);
      t.merge_slots_[t.merge_slot(key)] = MergeSlot{key, int32_t(rank), lr->second};
    }
    t.ignore_merges_ = ignore_merges;

    // --- added tokens
    for (const json& a : added) {
      const std::string content = field(a, "content", "an added token", origin).get<std::string>();
      const int32_t id = json_number<int32_t>(a["id"]);
      if (flag(a, "lstrip", false) || flag(a, "rstrip", false) || flag(a, "single_word", false) ||
          flag(a, "normalized", false))
        fail("{}: added token \"{}\" uses lstrip/rstrip/single_word/normalized, which are not supported", origin,
             content);
      define(content, id, "added token");
      t.id_special_[size_t(id)] = flag(a, "special", false) ? 1 : 0;
      auto& bucket = t.added_by_first_byte_[uint8_t(content[0])];
      if (std::none_of(bucket.begin(), bucket.end(), [&](const AddedToken& x) { return x.content == content; }))
        bucket.push_back(AddedToken{content, id});
    }
    for (auto& bucket : t.added_by_first_byte_)
      std::stable_sort(bucket.begin(), bucket.end(),
                       [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });

    t.id_bytes_.resize(t.id_text_.size());
    for (size_t id = 0; id < t.id_text_.size(); ++id)
      if (!t.id_text_[id].empty()) {
        t.id_bytes_[id] = token_bytes_of(t.id_text_[id], code_point_to_byte);
        t.max_token_bytes_ = std::max(t.max_token_bytes_, t.id_bytes_[id].size());
      }

    // --- normalizer
    const json& normalizer = doc.contains("normalizer") ? doc["normalizer"] : json();
    if (!normalizer.is_null()) {
      if (normalizer.value("type", "") != "NFC")
        fail("{}: normalizer {} is not supported (only NFC or none)", origin, normalizer.dump().substr(0, 200));
      t.nfc_ = true;
    }

    // --- pre-tokenizer: Split(regex, Isolated)* then ByteLevel(add_prefix_space=false)
    const json& pre = field(doc, "pre_tokenizer", "the document", origin);
    std::vector<json> steps;
    if (pre.is_object() && pre.value("type", "") == "Sequence") {
      for (const json& s : field(pre, "pretokenizers", "pre_tokenizer", origin)) steps.push_back(s);
    } else {
      steps.push_back(pre);
    }
    std::vector<std::string> patterns;
    for (size_t i = 0; i < steps.size(); ++i) {
      const json& s = steps[i];
      const std::string type = s.is_object() ? s.value("type", "") : "";
      const bool last = i + 1 == steps.size();
      if (type == "Split" && !last) {
        const json& pattern = field(s, "pattern", "a Split pre-tokenizer", origin);
        if (!pattern.contains("Regex"))
          fail("{}: Split pre-tokenizer pattern {} is not supported (only Regex)", origin, pattern.dump());
        if (s.value("behavior", "") != "Isolated" || flag(s, "invert", false))
          fail("{}: Split pre-tokenizer behavior {} / invert is not supported (only Isolated)", origin,
               s.value("behavior", ""));
        patterns.push_back(onig_to_pcre2(pattern["Regex"].get<std::string>()));
      } else if (type == "ByteLevel" && last) {
        if (flag(s, "add_prefix_space", true))
          fail("{}: ByteLevel pre-tokenizer add_prefix_space=true is not supported", origin);
        if (flag(s, "use_regex", true)) patterns.push_back(onig_to_pcre2(kGpt2Pattern));
      } else {
        fail("{}: pre_tokenizer step {} ({}) is not supported; expected Split(Regex, Isolated) steps ending "
             "in ByteLevel",
             origin, i, type.empty() ? "?" : type);
      }
    }
    for (const std::string& p : patterns) {
      int err = 0;
      PCRE2_SIZE at = 0;
      auto re = std::make_unique<Regex>();
      re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP, &err, &at,
                               nullptr);
      if (!re->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        fail("{}: pre-tokenizer regex does not compile at offset {}: {}", origin, size_t(at),
             reinterpret_cast<const char*>(msg));
      }
      // JIT is an optimisation: without it pcre2_match interprets the same pattern.
      pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
      t.splits_.push_back(std::move(re));
    }

    // --- decoder
    const json& decoder = doc.contains("decoder") ? doc["decoder"] : json();
    if (!decoder.is_object() || decoder.value("type", "") != "ByteLevel")
      fail("{}: decoder {} is not supported (only ByteLevel)", origin, decoder.dump().substr(0, 200));
  } catch (const json::exception& e) {
    fail("{}: malformed tokenizer: {}", origin, e.what());
  }
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  return *encode_within(text, std::numeric_limits<size_t>::max());
}

std::optional<std::vector<int32_t>> Tokenizer::encode_within(std::string_view text, size_t max_tokens) const {
  Budget budget{max_tokens};
  std::string repaired;
  if (!is_valid_utf8(text)) {
    append_utf8_lossy(text, repaired, /*final=*/true);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  size_t start = 0;  // of the section not yet encoded
  for (size_t i = 0; i < text.size();) {
    const auto& bucket = added_by_first_byte_[uint8_t(text[i])];
    const AddedToken* hit = nullptr;
    for (const AddedToken& a : bucket) {  // longest first
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    encode_section(text.substr(start, i - start), ids, budget);
    ids.push_back(hit->id);
    if (budget.over || ids.size() > budget.limit) return std::nullopt;
    i += hit->content.size();
    start = i;
  }
  encode_section(text.substr(start), ids, budget);
  if (budget.over) return std::nullopt;
  return ids;
}

void Tokenizer::encode_section(std::string_view text, std::vector<int32_t>& ids, Budget& budget) const {
  if (text.empty() || budget.over) return;
  if (!nfc_ || is_ascii(text)) return split_and_merge(text, 0, ids, budget);
  utf8proc_uint8_t* normalized = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), utf8proc_ssize_t(text.size()),
                   &normalized, utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  CHECK(n >= 0, fmt::format("utf8proc_map failed on well-formed input: {}", utf8proc_errmsg(n)));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(normalized, &std::free);
  split_and_merge(std::string_view(reinterpret_cast<const char*>(normalized), size_t(n)), 0, ids, budget);
}

void Tokenizer::split_and_merge(std::string_view piece, size_t level, std::vector<int32_t>& ids,
                                Budget& budget) const {
  if (piece.empty() || budget.over) return;
  if (level == splits_.size()) {
    // The fewest ids this piece can take: checked before BPE so that a huge piece costs nothing.
    const size_t least = (piece.size() + max_token_bytes_ - 1) / max_token_bytes_;
    if (ids.size() + least > budget.limit) {
      budget.over = true;
      return;
    }
    bpe(piece, ids);
    budget.over = ids.size() > budget.limit;
    return;
  }
  PcreScratch& scratch = pcre_scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t pos = 0, done = 0;  // next search start; end of what has been handed on
  while (pos < piece.size()) {
    // NO_UTF_CHECK: the text was validated once in encode(); rechecking per match is quadratic.
    const int rc = pcre2_match(splits_[level]->code, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK, scratch.match,
                               scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      fail("tokenizer: pre-tokenizer regex failed on a {}-byte piece: {}", piece.size(),
           reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.match);
    const size_t begin = ov[0], end = ov[1];
    if (end == begin) {  // an empty match delimits nothing; step over one code point
      pos = begin < piece.size() ? begin + scan_utf8(piece, begin).len : piece.size();
      continue;
    }
    // Isolated: the text between matches and each match are pieces of their own.
    split_and_merge(piece.substr(done, begin - done), level + 1, ids, budget);
    split_and_merge(piece.substr(begin, end - begin), level + 1, ids, budget);
    if (budget.over) return;
    done = pos = end;
  }
  split_and_merge(piece.substr(done), level + 1, ids, budget);
}

void Tokenizer::bpe(std::string_view piece, std::vector<int32_t>& ids) const {
  if (piece.size() == 1) {
    ids.push_back(byte_id_[uint8_t(piece[0])]);
    return;
  }
  if (ignore_merges_) {  // a piece that is itself a token is taken whole, merges or not
    std::string text;
    for (char c : piece) text += byte_text_[uint8_t(c)];
    if (auto it = text_to_id_.find(text); it != text_to_id_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  if (piece.size() > kMaxCachedPieceBytes) return bpe_uncached(piece, ids);
  const size_t h = std::hash<std::string_view>{}(piece) & (Cache::kSlots - 1);
  std::mutex& lock = cache_->locks[h % Cache::kStripes];
  Cache::Slot& slot = cache_->slots[h];
  {
    std::lock_guard guard(lock);
    if (slot.piece == piece) {
      ids.insert(ids.end(), slot.ids.begin(), slot.ids.end());
      return;
    }
  }
  const size_t start = ids.size();
  bpe_uncached(piece, ids);
  std::lock_guard guard(lock);
  slot.piece.assign(piece);
  slot.ids.assign(ids.begin() + ptrdiff_t(start), ids.end());
}

// HF's Word::merge_all: symbols form a linked list over the piece's bytes; a heap holds candidate
// pairs ordered by (merge rank, position); a popped candidate whose symbols have since changed is
// stale and skipped. A symbol's id only ever changes by absorbing its right neighbour (and dead
// symbols get -1), so comparing both ids detects staleness.
void Tokenizer::bpe_uncached(std::string_view piece, std::vector<int32_t>& ids) const {
  struct Symbol {
    int32_t id, prev, next;
  };
  struct Candidate {
    int32_t rank, pos, left, right, merged;
  };
  // Reused across calls: allocation would otherwise cost as much as the merging.
  thread_local std::vector<Symbol> sym;
  thread_local std::vector<Candidate> heap;
  const int n = int(piece.size());
  sym.resize(piece.size());
  heap.clear();
  for (int i = 0; i < n; ++i) sym[i] = Symbol{byte_id_[uint8_t(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};
  // std heap is a max-heap: this order puts the lowest rank, then the leftmost position, on top.
  auto after = [](const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
  auto consider = [&](int32_t pos) {
    const int32_t nx = sym[pos].next;
    if (nx < 0) return;
    const MergeSlot* m = find_merge(sym[pos].id, sym[nx].id);
    if (!m) return;
    heap.push_back(Candidate{m->rank, pos, sym[pos].id, sym[nx].id, m->id});
    std::push_heap(heap.begin(), heap.end(), after);
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& s = sym[c.pos];
    if (s.id != c.left || s.next < 0 || sym[s.next].id != c.right) continue;
    Symbol& right = sym[s.next];
    s.id = c.merged;
    right.id = -1;
    s.next = right.next;
    if (s.next >= 0) sym[s.next].prev = c.pos;
    if (s.prev >= 0) consider(s.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) ids.push_back(sym[i].id);
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) bytes += token_bytes(id);
  std::string out;
  out.reserve(bytes.size());
  append_utf8_lossy(bytes, out, /*final=*/true);
  return out;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  auto it = text_to_id_.find(token);
  if (it == text_to_id_.end()) return std::nullopt;
  return it->second;
}

std::string_view Tokenizer::token_text(int32_t id) const {
  if (id < 0 || size_t(id) >= id_text_.size()) return {};
  return id_text_[size_t(id)];
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || size_t(id) >= id_bytes_.size()) return {};
  return id_bytes_[size_t(id)];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && size_t(id) < id_special_.size() && id_special_[size_t(id)];
}

}  // namespace rocket
