// The plan's kernel table: the compiler's tiling of every h200 kernel at every bucket, read back from
// plan JSON, validated, and covered by the memory map's workspaces. Plans come from the a3b and tiny
// configs and the committed H200 profile, as `rocket build --booster h200` makes them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "boosters/profile.h"
#include "compiler/kernel_selection.h"
#include "compiler/memory_map.h"
#include "compiler/precision_map.h"
#include "core/error.h"
#include "fuel/forge.h"
#include "kernels/tiling/attention.h"
#include "kernels/tiling/dense.h"
#include "kernels/tiling/moe.h"
#include "test_paths.h"

namespace rocket {
namespace {

// `precision`: a map for `rocket build --precision` (roles the fuel stores in BF16).
Plan h200_plan(const std::string& fuel, int layers, WeightFormat f, int max_streams = 32, const std::string& precision = "") {
  Chemistry c = chemistry_from_config(forge_config(fuel, layers), f, fuel + "/config.json");
  if (!precision.empty()) apply_precision_map(c, precision, "h200");
  const HardwareProfile hw = load_profile(test::source_dir() + "/boosters/h200.json");
  Plan p = plan_memory(c, PlanOptions{.booster = "h200", .buckets = buckets_up_to(max_streams), .limits = booster_limits(hw)});
  p.kernels = select_kernels(p);
  p.validate("plan");
  return p;
}

const PlanBuffer& buffer(const Plan& p, const std::string& name) {
  for (const PlanBuffer& b : p.buffers)
    if (b.name == name) return b;
  fail("no buffer {}", name);
}

const PlanKernel& kernel(const Plan& p, const std::string& name, int bucket) {
  for (const PlanKernel& k : p.kernels)
    if (k.kernel == name && k.bucket == bucket) return k;
  fail("no kernel {} at bucket {}", name, bucket);
}

int64_t tile(const PlanKernel& k, const std::string& name) {
  for (const auto& [n, v] : k.tile)
    if (n == name) return v;
  fail("kernel {} has no tile parameter {}", k.kernel, name);
}

struct FuelCase {
  std::string name;
  int layers;
  WeightFormat format;
};
const FuelCase kFuels[] = {{"a3b", 4, WeightFormat::kNVFP4}, {"a3b", 4, WeightFormat::kBF16}, {"tiny", 0, WeightFormat::kBF16}};

TEST(KernelTable, EveryKernelAtEveryBucket) {
  for (const FuelCase& f : kFuels) {
    const Plan p = h200_plan(f.name, f.layers, f.format);
    EXPECT_EQ(p.limits.sms, 132);
    EXPECT_EQ(p.limits.smem_per_block, 227 * 1024);
    std::map<std::string, std::set<int>> at;
    for (const PlanKernel& k : p.kernels) {
      EXPECT_TRUE(at[k.kernel].insert(k.bucket).second) << k.kernel << " twice at " << k.bucket;
      EXPECT_GE(k.grid, 1) << k.kernel;
      EXPECT_LE(k.smem_bytes, p.limits.smem_per_block) << k.kernel;
      EXPECT_FALSE(k.tile.empty()) << k.kernel;
    }
    EXPECT_EQ(at.size(), 12u) << f.name;
    for (const auto& [name, buckets] : at) EXPECT_EQ(buckets, std::set<int>(p.buckets.begin(), p.buckets.end())) << name;
  }
}

// Values worked by hand from the tiling rules for a3b NVFP4 (hidden 2048, vocab 248320, 16 Q / 2 KV
// heads x 256, 32 V heads x 128, 256 experts top-8, intermediate 512).
TEST(KernelTable, A3bChoices) {
  const Plan p = h200_plan("a3b", 4, WeightFormat::kNVFP4);
  // The LM head (15520 tiles >= 64 per SM) streams up to 16 rows, one persistent block per SM.
  EXPECT_EQ(tile(kernel(p, "dense_lm_head", 16), "form"), 1);
  EXPECT_EQ(kernel(p, "dense_lm_head", 16).grid, 132);
  EXPECT_EQ(tile(kernel(p, "dense_lm_head", 32), "form"), 0);
  // o_proj 2048 x 4096: 128 tiles, at most one per SM, so 32 warps per tile.
  EXPECT_EQ(tile(kernel(p, "dense_attn_o", 1), "warps_per_tile"), 32);
  EXPECT_EQ(kernel(p, "dense_attn_o", 1).grid, 128);
  // GDN: clusters of 4 blocks of 32 columns below 8 rows, of 2 blocks of 64 from 8.
  EXPECT_EQ(tile(kernel(p, "gdn_decode", 1), "cluster"), 4);
  EXPECT_EQ(kernel(p, "gdn_decode", 1).grid, 128);
  EXPECT_EQ(tile(kernel(p, "gdn_decode", 8), "cluster"), 2);
  EXPECT_EQ(kernel(p, "gdn_decode", 8).threads, 256);
  // Attention: 256 target blocks over (rows x 2 KV heads).
  EXPECT_EQ(tile(kernel(p, "attention_decode", 1), "splits"), 128);
  EXPECT_EQ(tile(kernel(p, "attention_decode", 32), "splits"), 4);
  // The MoE warp rule: 8 warps, 4 at buckets 8 and 32; down 24 warps, 32 from bucket 16.
  for (int b : {1, 2, 4, 16}) EXPECT_EQ(tile(kernel(p, "moe_gate_up", b), "warps"), 8) << b;
  for (int b : {8, 32}) EXPECT_EQ(tile(kernel(p, "moe_gate_up", b), "warps"), 4) << b;
  for (int b : {1, 2, 4, 8}) EXPECT_EQ(tile(kernel(p, "moe_down", b), "warps"), 24) << b;
  for (int b : {16, 32}) EXPECT_EQ(tile(kernel(p, "moe_down", b), "warps"), 32) << b;
  EXPECT_EQ(tile(kernel(p, "moe_route", 8), "fused_router"), 1);
  EXPECT_EQ(tile(kernel(p, "moe_route", 16), "fused_router"), 0);
  EXPECT_EQ(kernel(p, "sample", 4).grid, 32);
}

// Past 32 rows the dense register form doubles its register budget (128 per thread, so at most 512
// threads per SM) and every kernel has an entry at 64.
TEST(KernelTable, Bucket64) {
  for (const FuelCase& f : kFuels) {
    const Plan p = h200_plan(f.name, f.layers, f.format, 64);
    EXPECT_EQ(p.buckets, (std::vector<int>{1, 2, 4, 8, 16, 32, 64}));
    EXPECT_EQ(p.max_streams, 64);
    for (const PlanKernel& k : p.kernels) {
      if (k.kernel.rfind("dense_", 0) != 0 || tile(k, "form") != 0) continue;
      const int64_t per_sm = k.threads * tile(k, "min_blocks");
      if (k.bucket == 64) {
        EXPECT_LE(k.threads, 512) << k.kernel;
        EXPECT_EQ(per_sm, 512) << k.kernel;
      } else {
        EXPECT_EQ(per_sm, 1024) << k.kernel << " at " << k.bucket;
      }
    }
    // The LM head streams up to 16 rows only; at 64 it takes the register form, four stages a warp.
    EXPECT_EQ(tile(kernel(p, "dense_lm_head", 64), "form"), 0);
    EXPECT_EQ(tile(kernel(p, "dense_lm_head", 64), "stages_per_warp"), 4);
  }
}

// Unasked, an h200 plan takes the largest bucket its memory holds: the kernels' 64 where the arena
// fits, 32 where it does not, and never a bucket fixed snapshots cannot serve two per stream.
TEST(KernelTable, MaxStreamsFromMemory) {
  const HardwareProfile hw = load_profile(test::source_dir() + "/boosters/h200.json");
  const Chemistry tiny = chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json");
  const PlanOptions base{.booster = "h200", .limits = booster_limits(hw)};
  EXPECT_EQ(h200_max_streams(tiny, base, hw.usable_bytes()), 64);
  // a3b NVFP4, 40 layers, a 33,792-token context and 256 snapshots (the device routine's engine): its
  // arena at 64 streams is ~84 GiB, at 32 ~62 GiB.
  const Chemistry a3b = chemistry_from_config(forge_config("a3b", 0), WeightFormat::kNVFP4, "a3b/config.json");
  PlanOptions big = base;
  big.max_context = 33792;
  big.state_snapshots = 256;
  big.buckets = buckets_up_to(64);
  const uint64_t at64 = plan_memory(a3b, big).arena_bytes;
  big.buckets = buckets_up_to(32);
  const uint64_t at32 = plan_memory(a3b, big).arena_bytes;
  ASSERT_GT(at64, at32);
  EXPECT_EQ(h200_max_streams(a3b, big, at64), 64);
  EXPECT_EQ(h200_max_streams(a3b, big, at64 - 1), 32);
  EXPECT_EQ(h200_max_streams(a3b, big, at32 - 1), 32);  // the floor: the build then refuses, saying by how much
  big.state_snapshots = 100;  // serves 50 streams two each, not 64
  EXPECT_EQ(h200_max_streams(a3b, big, at64 * 2), 32);
}

TEST(KernelTable, WorkspacesCoverTheTiling) {
  for (const FuelCase& f : kFuels) {
    const Plan p = h200_plan(f.name, f.layers, f.format, 64);
    const Chemistry& c = p.chemistry;
    const tiling::MoeDims moe{c.hidden, c.moe_inter, c.shared_inter, c.experts, c.top_k};
    for (int b : p.buckets) {
      EXPECT_LE(uint64_t(tile(kernel(p, "attention_decode", b), "workspace_bytes")), p.buffer("attn_partial").bytes) << b;
      EXPECT_LE(uint64_t(tile(kernel(p, "moe_gate_up", b), "workspace_bytes")), p.buffer("moe_partial").bytes) << b;
      EXPECT_LE(uint64_t(tile(kernel(p, "moe_gate_up", b), "arrival_counters")) * 4, p.buffer("moe_arrivals").bytes) << b;
      EXPECT_LE(uint64_t(tiling::moe_route_layout(moe, b).ints()) * 4, p.buffer("moe_route").bytes) << b;
    }
    // Sized for the largest need, not more.
    EXPECT_EQ(p.buffer("attn_partial").bytes,
              uint64_t(tiling::attention_tiling(c.heads, c.kv_heads, c.head_dim, p.max_streams).partial_floats) * 4);
  }
}

TEST(KernelTable, PlanJsonRoundTrips) {
  for (const FuelCase& f : kFuels) {
    const Plan p = h200_plan(f.name, f.layers, f.format);
    const Plan back = Plan::from_json(p.to_json(), "plan.json");
    EXPECT_EQ(back.limits, p.limits);
    ASSERT_EQ(back.kernels.size(), p.kernels.size());
    for (size_t i = 0; i < p.kernels.size(); ++i) {
      PlanKernel a = p.kernels[i], b = back.kernels[i];
      std::sort(a.tile.begin(), a.tile.end());
      std::sort(b.tile.begin(), b.tile.end());
      EXPECT_EQ(a, b) << a.kernel << " at " << a.bucket;
    }
    EXPECT_EQ(back.to_json(), p.to_json());
  }
}

TEST(KernelTable, ValidationRefusesABrokenTable) {
  const Plan p = h200_plan("tiny", 0, WeightFormat::kBF16);
  auto refused = [&](auto&& change, const std::string& why) {
    Plan q = p;
    change(q);
    try {
      Plan::from_json(q.to_json(), "plan.json");
      ADD_FAILURE() << "accepted: " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused([](Plan& q) { q.kernels.pop_back(); }, "of the 6 buckets");
  refused([](Plan& q) { q.kernels.push_back(q.kernels.front()); }, "twice");
  refused([](Plan& q) { q.kernels.front().bucket = 3; }, "does not compile");
  refused([](Plan& q) { q.kernels.front().threads = 48; }, "not a launch");
  refused([](Plan& q) { q.kernels.front().smem_bytes = q.limits.smem_per_block + 1; }, "shared memory");
  refused([](Plan& q) { q.kernels.clear(); }, "without its kernel table");
}

TEST(KernelTable, HostPlansHaveNone) {
  const Chemistry c = chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json");
  const Plan p = plan_memory(c, PlanOptions{.booster = "host"});
  EXPECT_TRUE(select_kernels(p).empty());
}

// A -FP8 release's plan: its projections and experts in block FP8, GDN's b|a (bf16, as the releases
// keep them) a launch of their own at every bucket, and the token path's dequantised copy sized for the
// largest FP8 projection (a3b: GDN's qkv and attention's q|gate, 8192 x 2048). A bf16 or NVFP4 plan has
// neither.
TEST(KernelTable, BlockFp8PlanLaunchesGdnGatesApartAndSizesTheDequantCopy) {
  const Plan fp8 = h200_plan("a3b", 4, WeightFormat::kFP8);
  EXPECT_NO_THROW(check_h200_precisions(fp8.chemistry));
  EXPECT_EQ(fp8.chemistry.precision(Role::kExperts), Precision::kFP8Block);
  EXPECT_EQ(fp8.chemistry.precision(Role::kGdnGate), Precision::kBF16);
  for (int b : fp8.buckets) {
    EXPECT_GT(kernel(fp8, "dense_gdn_gate", b).grid, 0) << b;
    EXPECT_GT(kernel(fp8, "dense_gdn_in", b).grid, 0) << b;
  }
  EXPECT_EQ(buffer(fp8, "dequant").bytes, 8192ull * 2048 * 2);
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kNVFP4}) {
    const Plan p = h200_plan("a3b", 4, f);
    EXPECT_EQ(buffer(p, "dequant").bytes, 0u) << format_name(f);
    EXPECT_TRUE(std::none_of(p.kernels.begin(), p.kernels.end(), [](const PlanKernel& k) { return k.kernel == "dense_gdn_gate"; }))
        << format_name(f);
  }
}

// An FP8 LM head (`--precision lm_head=fp8` on a BF16 fuel): the register form at every bucket, two
// stages a warp up to 32 rows like every FP8 projection (kernels/tiling/dense.h), and the token path's
// dequantised copy sized for one slice of it, not the whole head.
TEST(KernelTable, Fp8LmHeadTakesTheRegisterFormAndASliceOfDequantCopy) {
  const Plan p = h200_plan("a3b", 4, WeightFormat::kBF16, 64, "lm_head=fp8");
  EXPECT_EQ(p.chemistry.precision(Role::kLmHead), Precision::kFP8Block);
  for (int b : p.buckets) {
    const PlanKernel& k = kernel(p, "dense_lm_head", b);
    EXPECT_EQ(tile(k, "form"), 0) << b;
    EXPECT_EQ(tile(k, "stages_per_warp"), b <= 32 ? 2 : 4) << b;
  }
  EXPECT_EQ(buffer(p, "dequant").bytes, uint64_t(tiling::kLmHeadSliceRows) * 2048 * 2);
  // Beside FP8 projections whose copies are as large, the slice adds nothing.
  const Plan q = h200_plan("a3b", 4, WeightFormat::kBF16, 32, "lm_head=fp8,attn_proj=fp8,gdn_proj=fp8");
  EXPECT_EQ(buffer(q, "dequant").bytes, 8192ull * 2048 * 2);
}

}  // namespace
}  // namespace rocket
