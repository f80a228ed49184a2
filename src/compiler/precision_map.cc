#include "compiler/precision_map.h"

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "fuel/manifest.h"

namespace rocket {

void apply_precision_map(Chemistry& chem, const std::string& spec, const std::string& booster) {
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) fail("build: --precision '{}': expected role=precision", item);
    const Role r = parse_role(item.substr(0, eq));
    const Precision p = parse_precision(item.substr(eq + 1));
    const Precision stored = format_precision(chem.format, r);
    if (p == stored) {
      chem.precision_overrides[size_t(r)].reset();
      continue;
    }
    if (stored != Precision::kBF16)
      fail("build: --precision {}: the fuel stores {} in {}; only BF16 weights are converted (make the {} form from "
           "the BF16 checkpoint: rocket forge --from)", item, role_name(r), precision_name(stored), precision_name(p));
    if (r == Role::kEmbed) fail("build: --precision {}: the embedding is a gather and stays bf16", item);
    chem.precision_overrides[size_t(r)] = p;
  }
  for (const TensorSpec& t : fuel_manifest(chem))
    if (t.precision == Precision::kNVFP4 && t.part == Part::kWeight && t.cols % 16 != 0)
      fail("build: {} has {} inputs, not a multiple of 16: it cannot be NVFP4 (one scale per 16)", t.name, t.cols);
  if (booster == "h200") check_h200_precisions(chem);
}

void check_h200_precisions(const Chemistry& chem) {
  std::set<std::string> refused;  // sorted, so the message is stable
  for (int r = 0; r < int(Role::kCount); ++r) {
    const Role role = Role(r);
    const Precision p = chem.precision(role);
    const bool fp8_refused = role == Role::kEmbed || role == Role::kSharedExpertGate;
    if ((p == Precision::kFP8Block && fp8_refused) || (p == Precision::kNVFP4 && role != Role::kExperts))
      refused.insert(fmt::format("{}={}", role_name(role), precision_name(p)));
  }
  if (!refused.empty())
    fail("build: the h200 engine runs BF16 weights, block-FP8 projections, LM head, router and experts, and NVFP4 "
         "routed experts; it has no kernels for {}", fmt::join(refused, ", "));
  // A lane loads 16 weights of a row at a time, and the token path's expert GEMMs step 64 columns.
  for (const TensorSpec& t : fuel_manifest(chem))
    if (t.precision == Precision::kFP8Block && t.part == Part::kWeight && t.cols % 64 != 0)
      fail("build: {} has {} inputs, not a multiple of 64: the h200 kernels cannot run it in block FP8", t.name, t.cols);
}

std::string precision_map_spec(const Chemistry& chem) {
  std::string out;
  for (int r = 0; r < int(Role::kCount); ++r)
    if (const auto& p = chem.precision_overrides[size_t(r)])
      out += fmt::format("{}{}={}", out.empty() ? "" : ",", role_name(Role(r)), precision_name(*p));
  return out;
}

nlohmann::json admit_precision_map(const Chemistry& chem, const std::string& fuel_fingerprint,
                                   const std::string& report_path) {
  std::ifstream f(report_path);
  if (!f) fail("build: --gate {}: cannot read the report", report_path);
  const nlohmann::json r = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (r.is_discarded() || !r.is_object() || !r.contains("passed") || !r.contains("candidate") ||
      !r.contains("reference") || !r.contains("figures"))
    fail("build: --gate {}: not a report of rocket gate --out", report_path);
  const std::string map = quantised_roles(chem);
  const std::string judged = r["candidate"].value("precision", "");
  if (judged != map)
    fail("build: --gate {}: the report judged the map {}, this build's is {}", report_path, judged, map);
  if (r["reference"].value("precision", "") != "all bf16")
    fail("build: --gate {}: the report's reference is not an all-BF16 engine ({})", report_path,
         r["reference"].value("precision", ""));
  if (r.value("fuel_fingerprint", "") != fuel_fingerprint)
    fail("build: --gate {}: the report is of the fuel with fingerprint {}, this fuel's is {}", report_path,
         r.value("fuel_fingerprint", "?"), fuel_fingerprint);
  if (r["passed"] != true)
    fail("build: --gate {}: the gate rejected {}: {}", report_path, map, r.value("violations", nlohmann::json::array()).dump());
  return {{"report", report_path}, {"map", map}, {"thresholds", r.value("thresholds", nlohmann::json::object())},
          {"figures", r["figures"]}};
}

}  // namespace rocket
