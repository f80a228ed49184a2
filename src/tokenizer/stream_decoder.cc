#include "tokenizer/stream_decoder.h"

#include "core/utf8.h"

namespace rocket {

std::string StreamDecoder::push(int32_t id) {
  pending_ += tokenizer_->token_bytes(id);
  std::string out;
  const size_t consumed = append_utf8_lossy(pending_, out, /*final=*/false);
  pending_.erase(0, consumed);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  append_utf8_lossy(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

}  // namespace rocket
