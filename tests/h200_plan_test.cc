// The h200 plan: the workspaces the H200 kernels need, sized in the compiler from mirrors of the
// kernels' traits (the engine static_asserts the same bounds when it compiles), host plans untouched,
// and the memory-map comparison `rocket build --weights-only` refuses a mismatching fuel with.
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/compiler.h"
#include "compiler/memory_map.h"
#include "fuel/forge.h"

namespace rocket {
namespace {

Plan a3b_plan(WeightFormat f, int max_context = 9216) {
  const Chemistry c = chemistry_from_config(forge_config("a3b", 4), f, "a3b/config.json");
  return plan_memory(c, PlanOptions{.booster = "h200", .max_context = max_context});
}

bool has_buffer(const Plan& p, const std::string& name) {
  return std::any_of(p.buffers.begin(), p.buffers.end(), [&](const PlanBuffer& b) { return b.name == name; });
}

// Expected sizes worked by hand from the kernel traits for a3b (hidden 2048, 16 Q / 2 KV heads × 256,
// 256 experts top-8, intermediate 512) at buckets 1..32.
TEST(H200Plan, WorkspacesFollowTheKernelTraits) {
  const Plan p = a3b_plan(WeightFormat::kNVFP4);
  // AttentionTiles: b · splits = 128 for every bucket (splits = 256 / (b · 2)): 128 · 16 heads · 258 floats.
  EXPECT_EQ(p.buffer("attn_partial").bytes, 128u * 16 * 258 * 4);
  // MoeRoute<32>: active + expert[256] + start[257] + slot_row[256] + slot_of[256].
  EXPECT_EQ(p.buffer("moe_route").bytes, 4u * (1 + 256 + 257 + 256 + 256));
  // The bf16 shared expert takes 4 rounds of K to the NVFP4 experts' 1: 4 slices of 32 tiles, 4 row
  // groups at bucket 32, two float4 fragments per lane.
  EXPECT_EQ(p.buffer("moe_partial").bytes, 32u * 4 * 4 * 2 * 32 * 4 * 4);
  EXPECT_EQ(p.buffer("moe_arrivals").bytes, 32u * 4);  // one counter per group of shared-expert tiles
  EXPECT_EQ(p.buffer("moe_act").bytes, 32u * 8 * 512 * 2);
  EXPECT_EQ(p.buffer("shared_act").bytes, 32u * 512 * 2);
  EXPECT_EQ(p.buffer("step_inputs").bytes, 32u * (3 * 4 + 32));
  EXPECT_EQ(p.kv_page_tokens, 64);  // 2 KV heads × 256 × bf16 = 1 KiB per token
  EXPECT_EQ(p.buffer("page_tables").bytes, 33u * (9216 / 64) * 4);
  EXPECT_EQ(p.buffer("row_tables").bytes, 32u * (9216 / 64) * 4);
  // With bf16 experts the shared expert streams as many rounds as a routed one: no slices, no partials.
  EXPECT_EQ(a3b_plan(WeightFormat::kBF16).buffer("moe_partial").bytes, 4u);
}

TEST(H200Plan, HostPlansHaveNoH200Buffers) {
  const Chemistry c = chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json");
  const Plan host = plan_memory(c, PlanOptions{.booster = "host"});
  const Plan h200 = plan_memory(c, PlanOptions{.booster = "h200"});
  for (const char* name : {"step_inputs", "tokens_out", "page_tables", "row_tables", "attn_partial", "moe_route", "moe_act",
                           "shared_act", "moe_partial", "moe_arrivals"}) {
    EXPECT_FALSE(has_buffer(host, name)) << name;
    EXPECT_TRUE(has_buffer(h200, name)) << name;
  }
}

TEST(H200Plan, MemoryMapDifferenceNamesTheFirstMismatch) {
  const Plan p = a3b_plan(WeightFormat::kNVFP4);
  EXPECT_EQ(memory_map_difference(p, a3b_plan(WeightFormat::kNVFP4)), "");
  EXPECT_NE(memory_map_difference(p, a3b_plan(WeightFormat::kNVFP4, 8192)).find("arena"), std::string::npos);
  EXPECT_NE(memory_map_difference(p, a3b_plan(WeightFormat::kBF16)).find("chemistry"), std::string::npos);
  Plan moved = p;
  moved.buffers.back().offset += 65536;
  EXPECT_NE(memory_map_difference(p, moved).find("buffer " + p.buffers.back().name), std::string::npos);
}

}  // namespace
}  // namespace rocket
