// The h200 plan: the workspaces the H200 kernels need, sized in the compiler from the kernels' tiling
// (kernels/tiling/; the engine static_asserts the same bounds when it compiles), each booster's own buffers,
// the memory-map comparison `rocket build --weights-only` refuses a mismatching fuel with, and the
// conditioning of NVFP4 parts into the register code (host plans keep the checkpoint's bytes).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "test_paths.h"
#include "compiler/compiler.h"
#include "compiler/condition.h"
#include "kernels/tiling/gdn.h"
#include "kernels/tiling/moe.h"
#include "compiler/memory_map.h"
#include "compiler/nvfp4_code.h"
#include "core/dtype.h"
#include "fuel/forge.h"
#include "fuel/fuel.h"

namespace rocket {
namespace {

Plan a3b_plan(WeightFormat f, int max_context = 9216) {
  const Chemistry c = chemistry_from_config(forge_config("a3b", 4), f, "a3b/config.json");
  return plan_memory(c, PlanOptions{.booster = "h200", .max_context = max_context});
}

bool has_buffer(const Plan& p, const std::string& name) {
  return std::any_of(p.buffers.begin(), p.buffers.end(), [&](const PlanBuffer& b) { return b.name == name; });
}

// Expected sizes worked by hand from the kernel tiling rules for a3b (hidden 2048, 16 Q / 2 KV heads × 256,
// 256 experts top-8, intermediate 512) at buckets 1..32.
TEST(H200Plan, WorkspacesFollowTheKernelTraits) {
  const Plan p = a3b_plan(WeightFormat::kNVFP4);
  // AttentionTiles: b · splits = 128 for every bucket (splits = 256 / (b · 2)): 128 · 16 heads · 258 floats.
  EXPECT_EQ(p.buffer("attn_partial").bytes, 128u * 16 * 258 * 4);
  // MoeRoute<32>: active + expert[256] + start[257] + slot_row[256] + slot_of[256].
  EXPECT_EQ(p.buffer("moe_route").bytes, 4u * (1 + 256 + 257 + 256 + 256));
  // The bf16 shared expert takes 4 rounds of K to the NVFP4 experts' 1 below bucket 8 and 2 from 8
  // (MoeGateUpTraits::kNarrow): the most partials are 2 slices of 32 tiles at bucket 32 (4 row
  // groups), two float4 fragments per lane.
  EXPECT_EQ(p.buffer("moe_partial").bytes, 32u * 2 * 4 * 2 * 32 * 4 * 4);
  EXPECT_EQ(p.buffer("moe_arrivals").bytes, 32u * 4);  // one counter per group of shared-expert tiles
  EXPECT_EQ(p.buffer("moe_act").bytes, 32u * 8 * 512 * 2);
  EXPECT_EQ(p.buffer("shared_act").bytes, 32u * 512 * 2);
  // ids, slots, positions, rotary positions (t, h, w), 64-byte knobs
  EXPECT_EQ(p.buffer("step_inputs").bytes, 32u * (3 * 4 + 3 * 4 + 64));
  // The sampling histories of 32 streams: counts, prompt bits, 300 logit-bias entries.
  EXPECT_EQ(p.buffer("history_counts").bytes, 32u * 248320 * 4);
  EXPECT_EQ(p.buffer("history_prompt").bytes, 32u * (248320 / 32) * 4);
  EXPECT_EQ(p.buffer("history_bias").bytes, 32u * 300 * 8);
  EXPECT_EQ(p.kv_page_tokens, 64);  // 2 KV heads × 256 × bf16 = 1 KiB per token
  EXPECT_EQ(p.buffer("page_tables").bytes, 33u * (9216 / 64) * 4);
  // The token path: pieces of up to 2048 rows with their own workspaces, logits a pass of 32 rows.
  EXPECT_EQ(p.prefill_chunk, 2048);
  EXPECT_EQ(p.max_rows, 2048);
  EXPECT_EQ(p.logit_rows, 32);
  EXPECT_EQ(p.buffer("logits").bytes, 32ull * 248320 * 4);
  // ids, positions and rotary positions (t, h, w) of 2048 rows; each slot's index and GDN captures
  EXPECT_EQ(p.buffer("piece_inputs").bytes, (5u * 2048 + 33 * (1 + tiling::gdn_chunks(2048))) * 4);
  EXPECT_EQ(p.buffer("gdn_workspace").bytes, uint64_t(tiling::gdn_chunked_workspace_floats(16, 32, 128, 128, 2048)) * 4);
  EXPECT_EQ(p.buffer("moe_workspace").bytes,
            uint64_t(tiling::moe_piece_workspace(tiling::MoeDims{2048, 512, 512, 256, 8}, 2048).bytes));
  // With bf16 experts the shared expert streams as many rounds as a routed one: no slices, no partials.
  EXPECT_EQ(a3b_plan(WeightFormat::kBF16).buffer("moe_partial").bytes, 4u);
}

TEST(H200Plan, EachBoosterHasItsOwnBuffers) {
  const Chemistry c = chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json");
  const Plan host = plan_memory(c, PlanOptions{.booster = "host"});
  const Plan h200 = plan_memory(c, PlanOptions{.booster = "h200"});
  for (const char* name : {"step_inputs", "page_tables", "attn_partial", "moe_route", "moe_act",
                           "shared_act", "moe_partial", "moe_arrivals", "history_counts", "history_prompt",
                           "history_bias"}) {
    EXPECT_FALSE(has_buffer(host, name)) << name;
    EXPECT_TRUE(has_buffer(h200, name)) << name;
  }
  // The host engine's MoE staging: the h200 kernels keep it in registers.
  for (const char* name : {"moe_in", "moe_gate", "moe_up", "moe_down", "shared_gate", "shared_up"}) {
    EXPECT_TRUE(has_buffer(host, name)) << name;
    EXPECT_FALSE(has_buffer(h200, name)) << name;
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

TEST(H200Plan, ConditioningWritesNvfp4PartsInTheRegisterCode) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("rocket_condition_" + std::to_string(getpid()));
  fs::remove_all(dir);
  forge(ForgeOptions{.fuel = "tiny", .format = WeightFormat::kNVFP4, .seed = 3, .out = (dir / "fuel").string(),
                     .tokenizer_dir = test::qwen_tokenizer_dir()});
  const Fuel fuel = Fuel::open((dir / "fuel").string());
  auto blob_of = [&](const Plan& p, const std::string& name) {
    condition_weights(fuel, p, (dir / name).string());
    std::ifstream f(dir / name, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
  };
  const Plan host = plan_memory(fuel.chemistry(), PlanOptions{.booster = "host"});
  const Plan h200 = plan_memory(fuel.chemistry(), PlanOptions{.booster = "h200"});
  const std::vector<uint8_t> host_blob = blob_of(host, "host.blob"), h200_blob = blob_of(h200, "h200.blob");
  int coded = 0;
  for (const PlanTensor& t : h200.tensors) {
    const TensorView v = fuel.tensor(t.name);
    const PlanTensor* ht = host.find_tensor(t.name);
    ASSERT_NE(ht, nullptr) << t.name;
    EXPECT_EQ(std::memcmp(host_blob.data() + ht->offset, v.data, v.nbytes), 0) << "host plan, " << t.name;
    const PlanTensor* scale = h200.find_tensor(t.name + "_scale");
    if (t.dtype != DType::kU8 || !scale) {
      if (!(t.dtype == DType::kF8E4M3 && t.name.ends_with("_scale"))) {
        EXPECT_EQ(std::memcmp(h200_blob.data() + t.offset, v.data, v.nbytes), 0) << "h200 plan, " << t.name;
      }
      continue;
    }
    // Every weight of the h200 blob, decoded as the kernels do, equals e2m1 * e4m3 of the checkpoint.
    ++coded;
    const TensorView s = fuel.tensor(t.name + "_scale");
    const int64_t cols = 2 * t.shape[1];
    for (int64_t word = 0; word < int64_t(v.nbytes / 4); ++word) {
      uint32_t q, code;
      std::memcpy(&q, v.data + 4 * word, 4);
      std::memcpy(&code, h200_blob.data() + t.offset + 4 * word, 4);
      const int64_t block = word * 8 / 16;
      const uint8_t scale_code = h200_blob[scale->offset + block];
      const uint32_t scale_word = nvfp4_code::scale_word(scale_code);
      uint32_t img[4];
      nvfp4_code::images(code, img);
      for (int i = 0; i < 8; ++i) {
        const int half = 16 * (i % 2);
        const double got = double(bf16_to_f32(uint16_t(img[i / 2] >> half))) * double(bf16_to_f32(uint16_t(scale_word >> half)));
        const double want = double(e2m1_to_f32(uint8_t(q >> (4 * i) & 15u))) * double(e4m3_to_f32(s.data[block])) * 0x1p-7;
        ASSERT_EQ(got, want) << t.name << " row " << word * 8 / cols << " col " << word * 8 % cols + i;
      }
    }
  }
  EXPECT_GT(coded, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rocket
