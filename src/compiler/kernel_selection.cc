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
    // The kernels src/engine/h200/h200_engine.cu is built from (src/kernels/cuda/*.cuh), each with the
    // tiles its traits pin. Decode is bandwidth-bound: every weight byte is read once per step and
    // reused for the bucket's rows from registers; NVFP4 experts are weight-only, dequantised in
    // registers for bf16 tensor-core math, from the register code conditioning stores them in
    // (nvfp4_code.h). Activations and KV are bf16, recurrent state fp32.
    const std::string experts = precision_name(c.precision(Role::kExperts));
    const std::string expert_code = c.precision(Role::kExperts) == Precision::kNVFP4
                                        ? "register code: 4 rotations + 4 logic ops per 8 weights, e5m3 block scales"
                                        : "checkpoint layout";
    k.push_back({"linear", "bf16", "h200_dense_mma",
                 {{"form", "stream (persistent block per SM, bulk-copy ring of 16x1024 chunks, x in shared memory) for the "
                           "LM head up to 16 rows (>= 64 tiles per SM); registers otherwise"},
                  {"tile_rows", 16}, {"rows_per_mma", 8}, {"stages_per_warp", "registers: min(4, K/32); 2 at 32 rows"},
                  {"warps_per_tile", "min(K parts, 16 if tiles >= 264 else 32)"}, {"out", "bf16; fp32 router and LM head"},
                  {"lm_head_x_rows", "8 below 8 rows (every mma column reads a row of hn)"},
                  {"groups", "one launch each for GDN in_proj qkv|z|b|a and attention q|k|v"}}});
    k.push_back({"embedding", "bf16", "h200_gather", {{"vector_bytes", 16}}});
    k.push_back({"rms_norm", "bf16", "h200_fused_residual_norm", {{"block", "row"}, {"math", "fp32"}}});
    k.push_back({"conv1d", "bf16", "h200_depthwise_step", {{"threads", 256}, {"kernel", c.conv_kernel}}});
    // gdn.cuh GdnDecodeTiling: 32 columns per block below 8 rows, 64 from 8; four threads per column.
    const int narrow = std::min(c.lin_v_dim, 32), wide = std::min(c.lin_v_dim, 64);
    k.push_back({"gdn_decode", "fp32", "h200_state_in_registers",
                 {{"columns", {{"below_8_rows", narrow}, {"from_8_rows", wide}}},
                  {"threads", {{"below_8_rows", 4 * narrow}, {"from_8_rows", 4 * wide}}},
                  {"cluster", {{"below_8_rows", c.lin_v_dim / narrow}, {"from_8_rows", c.lin_v_dim / wide}}}}});
    k.push_back({"gdn_prefill", "fp32", "h200_state_in_registers", {{"tokens_per_launch", "chunk"}, {"columns", 32}}});
    k.push_back({"attention", "bf16", "h200_paged_split_kv",
                 {{"warps", 4}, {"tokens_per_lane", 4}, {"target_blocks", 256}, {"combine_threads", 256}}});
    k.push_back({"attention_prefill", "bf16", "h200_append_then_split", {{"rows", "chunk"}}});
    k.push_back({"router", "fp32", "h200_warp_top_k", {{"rows_per_block", 4}, {"fused_into_dispatch_up_to_rows", 8}}});
    k.push_back({"moe_dispatch", "int32", "h200_exact_rows", {{"blocks", 1}}});
    k.push_back({"moe_gate_up", experts, "h200_grouped_mma_weight_only",
                 {{"warps", "8; 4 at buckets 8 and 32 (nvfp4)"}, {"tile_rows", 16}, {"rows_per_mma", 8}, {"shared_expert", "fused"},
                  {"weights", expert_code}}});
    k.push_back({"moe_down", experts, "h200_grouped_mma_combine",
                 {{"warps", "24; 32 from bucket 16 (nvfp4)"}, {"columns_per_block", 16},
                  {"k_per_unit", "half up to 8 rows (two units in flight), whole from 16"},
                  {"launch", "programmatic dependent on moe_gate_up"}, {"weights", expert_code}}});
    k.push_back({"sampling", "fp32", "h200_cluster_radix", {{"cluster", 8}, {"threads", 512}, {"rng", "splitmix64(seed, counter)"}}});
  } else {
    fail("unknown booster '{}' (expected host or h200)", booster);
  }
  return k;
}

}  // namespace rocket
