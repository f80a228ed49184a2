// Byte-level BPE tokenizer for a fuel's tokenizer.json (Qwen2/Qwen3 family), producing exactly the ids
// HF `tokenizers` produces with add_special_tokens=false and split_special_tokens=false.
//
// Pipeline of encode(), the same as HF's:
//   1. added tokens (special or not: <|im_start|>, <think>, <tool_call>, ...) are matched literally on
//      the raw text, leftmost then longest, and are never split, normalised or merged;
//   2. each stretch of text between them is NFC-normalised (utf8proc),
//   3. split by the pre-tokenizer regex(es) (PCRE2, translated from HF's Oniguruma dialect),
//   4. each piece's UTF-8 bytes become single-byte tokens (the GPT-2 byte-to-unicode alphabet), and
//   5. BPE merges them, lowest merge rank first, leftmost first on ties.
// decode() concatenates token bytes and replaces ill-formed UTF-8 with U+FFFD, as HF's ByteLevel
// decoder (Rust from_utf8_lossy, i.e. Python's errors="replace") does.
//
// Only the configuration Qwen uses is implemented; load() refuses any other with a reason rather than
// tokenizing differently from HF.
//
// Thread safety: a loaded Tokenizer is immutable except for an internal, mutex-guarded piece cache, so
// encode() and decode() may be called concurrently from any number of threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rocket {

class Tokenizer {
 public:
  // Throws Error naming the file when it cannot be read, is not JSON, lacks a field, or asks for a
  // feature this tokenizer does not implement.
  static Tokenizer load(const std::string& tokenizer_json_path);
  // Same from an already-parsed document; `origin` names it in errors.
  static Tokenizer from_json(const nlohmann::json& doc, const std::string& origin);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // Ill-formed UTF-8 in `text` is read as U+FFFD per maximal ill-formed subsequence (HF cannot see
  // such input at all: Python and JS strings are already decoded).
  std::vector<int32_t> encode(std::string_view text) const;
  // As encode(), but gives up (nullopt) as soon as the encoding is known to need more than
  // `max_tokens` ids: an oversized prompt costs the work of its first max_tokens tokens, not of all
  // its text. A piece is known to be too long before BPE from its length in bytes (no token is longer
  // than the vocabulary's longest).
  std::optional<std::vector<int32_t>> encode_within(std::string_view text, size_t max_tokens) const;

  // Ids that name no token (negative, >= vocab_size(), or a gap in the id space) decode to nothing,
  // as HF's decode drops them; special tokens are kept (skip_special_tokens=false).
  std::string decode(std::span<const int32_t> ids) const;

  // One past the largest token id, added tokens included (151669 for Qwen3). The model's embedding
  // may have more rows than this; ids in between are padding and name no token.
  int32_t vocab_size() const { return int32_t(id_text_.size()); }

  // The id of a token given in vocabulary form ("Ġhello", "<|im_end|>"), as convert_tokens_to_ids.
  std::optional<int32_t> token_id(std::string_view token) const;
  // The vocabulary form of a token; empty for an id that names no token.
  std::string_view token_text(int32_t id) const;
  // The raw bytes a token stands for (may be part of a UTF-8 sequence); empty for an unknown id.
  std::string_view token_bytes(int32_t id) const;
  // True for added tokens marked "special" (<|im_start|>, <|endoftext|>; not <think>).
  bool is_special(int32_t id) const;

 private:
  // Merges live in an open-addressing table keyed by the (left, right) id pair: BPE's cost is these
  // lookups, and one probe into a flat array is a cache miss where a node-based map is two.
  struct MergeSlot {
    uint64_t key = kNoKey;
    int32_t rank = 0;
    int32_t id = 0;  // the merged token
  };
  static constexpr uint64_t kNoKey = ~uint64_t(0);  // ids are < 2^24, so no pair has this key
  struct AddedToken {
    std::string content;
    int32_t id;
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Regex;  // a compiled PCRE2 pattern
  struct Cache;  // piece bytes -> ids

  Tokenizer();
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }

  // How many ids an encoding may hold; `over` once it is known to need more (encoding then stops).
  struct Budget {
    size_t limit;
    bool over = false;
  };
  // Encodes a stretch of text that holds no added token.
  void encode_section(std::string_view text, std::vector<int32_t>& ids, Budget& budget) const;
  // Applies split regex `level` and those after it, then BPE.
  void split_and_merge(std::string_view piece, size_t level, std::vector<int32_t>& ids, Budget& budget) const;
  // Append the BPE tokens of one piece to `ids`.
  void bpe(std::string_view piece, std::vector<int32_t>& ids) const;
  void bpe_uncached(std::string_view piece, std::vector<int32_t>& ids) const;
  size_t merge_slot(uint64_t key) const {  // first slot holding `key` or free
    size_t i = size_t((key * 0x9E3779B97F4A7C15ull) >> merge_shift_);
    while (merge_slots_[i].key != key && merge_slots_[i].key != kNoKey) i = (i + 1) & merge_mask_;
    return i;
  }
  const MergeSlot* find_merge(int32_t left, int32_t right) const {
    const MergeSlot& s = merge_slots_[merge_slot(pair_key(left, right))];
    return s.key == kNoKey ? nullptr : &s;
  }

  std::vector<std::string> id_text_;   // vocabulary form by id; empty = no token
  std::vector<std::string> id_bytes_;  // raw bytes by id
  size_t max_token_bytes_ = 1;         // the longest id_bytes_
  std::vector<uint8_t> id_special_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> text_to_id_;
  std::array<int32_t, 256> byte_id_{};       // the single-byte token of each byte value
  std::array<std::string, 256> byte_text_;   // its vocabulary form ("Ġ" for the space byte)
  bool ignore_merges_ = false;               // a piece that is a token is taken whole (Llama 3 style)
  std::vector<MergeSlot> merge_slots_;  // power-of-two size, at most half full
  size_t merge_mask_ = 0;
  int merge_shift_ = 64;
  // Added tokens grouped by first byte, longest first, so the first hit at a position is the longest.
  std::array<std::vector<AddedToken>, 256> added_by_first_byte_;
  bool nfc_ = false;
  std::vector<std::unique_ptr<Regex>> splits_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace rocket
