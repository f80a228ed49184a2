#include "http/sse.h"

namespace rocket {

std::string sse_data(const nlohmann::ordered_json& payload) {
  std::string out = "data: ";
  out += payload.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
  out += "\n\n";
  return out;
}

std::string sse_event(const nlohmann::ordered_json& payload) {
  return "event: " + payload.at("type").get<std::string>() + "\n" + sse_data(payload);
}

}  // namespace rocket
