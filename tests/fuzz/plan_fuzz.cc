// plan.json as an engine directory could hold it (hand-edited, truncated, from another version):
// Plan::from_json parses and validates, refusing with an Error that names the field; a crash, a
// sanitizer report or an accepted plan that fails its own validation is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    const rocket::Plan plan = rocket::Plan::from_json(j, "fuzz/plan.json");
    plan.validate("fuzz/plan.json");
    // What was accepted writes back to JSON that reads back to the same plan.
    const rocket::Plan again = rocket::Plan::from_json(plan.to_json(), "fuzz/plan.json (again)");
    if (again.to_json() != plan.to_json()) __builtin_trap();
  } catch (const rocket::Error&) {
  }
  return 0;
}
