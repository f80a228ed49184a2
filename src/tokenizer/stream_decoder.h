// Incremental detokenisation for streaming responses: ids go in one at a time, and only complete
// UTF-8 comes out. A token may end inside a multi-byte character (byte-level BPE splits rare emoji
// and CJK characters across tokens); those bytes are held back until the character completes.
//
// Invariant: the concatenation of every push() result followed by flush() equals
// Tokenizer::decode() of the same ids, byte for byte.
//
// Not thread-safe: one per response. REQUIRES: the Tokenizer outlives the decoder.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace rocket {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // Returns the text that `id` completes: possibly empty, never a partial character. Ill-formed
  // bytes are replaced by U+FFFD as soon as they are known to be ill-formed. An unknown id adds
  // nothing.
  std::string push(int32_t id);

  // Ends the stream: returns any held-back incomplete sequence as U+FFFD (HF's errors="replace")
  // and resets the decoder for reuse.
  std::string flush();

  // Bytes held back, awaiting the rest of their character (at most 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace rocket
