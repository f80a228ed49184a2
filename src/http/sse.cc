#include "http/sse.h"

namespace rocket {

std::string sse_data(const nlohmann::ordered_json& payload) {
  std::string out = "data: ";
  out += payload.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
  out += "\n\n";
  return out;
}

}  // namespace rocket
