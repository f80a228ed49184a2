#include "compiler/kernel_selection.h"

#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace rocket {

std::vector<KernelChoice> select_kernels(const Chemistry& c, const std::string& booster) {
  std::vector<KernelChoice> k;
  if (booster == "host") {
    // The host booster: OpenMP over output rows; each row is dequantised once into registers/L1
    // and reused across every token row of the call. 16 rows per task keeps the scheduling cost
    // small against a row of >= 128 weights.
    std::set<Precision> linear_precisions;
    for (int r = 0; r < int(Role::kCount); ++r) linear_precisions.insert(c.precision(Role(r)));
    for (Precision p : linear_precisions)
      k.push_back({"linear", precision_name(p), "host_row_dequant_dot", {{"rows_per_task", 16}}});
    k.push_back({"gdn_decode", "fp32", "host_recurrent_step", {{"state", "fp32 [v_heads][k_dim][v_dim]"}}});
    k.push_back({"gdn_prefill", "fp32", "host_recurrent_scan", {{"chunk", 1}}});
    k.push_back({"conv1d", "fp32", "host_depthwise_step", {{"kernel", c.conv_kernel}}});
    k.push_back({"attention", "fp32", "host_gqa_decode", {{"heads_per_task", 1}}});
    k.push_back({"moe", precision_name(c.precision(Role::kExperts)), "host_grouped_by_expert", {{"top_k", c.top_k}}});
    k.push_back({"sampling", "fp32", "host_sort_top_p", {{"rng", "splitmix64(seed, counter)"}}});
  } else if (booster == "h200") {
    // Decode is bandwidth-bound: every weight byte read once per step, NVFP4 experts weight-only
    // (dequantised in registers). The linear rows name the kernel in src/kernels/cuda/gemv.cuh and
    // its GemvTraits; rows marked "planned" name kernels the H200 engine issue has still to land.
    const nlohmann::json gemv_small = {{"warps", 8}, {"rows_per_warp", 2}, {"k_tile", 2048}, {"buckets", "1-8"}};
    const nlohmann::json gemv_large = {{"warps", 8}, {"rows_per_warp", 2}, {"k_tile", 1024}, {"buckets", "16-32"}};
    k.push_back({"linear", "bf16", "h200_gemv", gemv_small});
    k.push_back({"linear", "bf16", "h200_gemv", gemv_large});
    k.push_back({"experts", precision_name(c.precision(Role::kExperts)), "h200_gemv_weight_only", gemv_small});
    k.push_back({"gdn_decode", "fp32", "planned: h200_state_in_registers", {{"v_tile", 32}}});
    k.push_back({"gdn_prefill", "fp32", "planned: h200_chunked", {{"chunk", 64}}});
    k.push_back({"attention", "bf16", "planned: h200_paged_gqa_decode", {{"split_kv", 4}}});
    k.push_back({"sampling", "fp32", "planned: h200_topk_top_p", {{"rng", "philox4x32"}}});
  } else {
    fail("unknown booster '{}' (expected host or h200)", booster);
  }
  return k;
}

}  // namespace rocket
