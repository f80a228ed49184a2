// A request head as a client sends it (http/request_head.h): never a crash, a verdict only of the
// statuses it documents, and the same verdict for the same head; a refusal's message is printable
// ASCII (it is quoted into a JSON answer).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "http/request_head.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view head(reinterpret_cast<const char*>(data), size);
  const size_t limit = size_t(1) << 20;
  const rocket::HeadVerdict v = rocket::check_request_head(head, limit);
  if (v.status != 0 && v.status != 400 && v.status != 413 && v.status != 415) std::abort();
  if (v.status != rocket::check_request_head(head, limit).status) std::abort();
  for (char c : v.message)
    if (c < 0x20 || c >= 0x7f) std::abort();
  return 0;
}
