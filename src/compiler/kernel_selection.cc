#include "compiler/kernel_selection.h"

#include "core/error.h"
#include "kernels/tiling/attention.h"
#include "kernels/tiling/dense.h"
#include "kernels/tiling/gdn.h"
#include "kernels/tiling/moe.h"
#include "kernels/tiling/sample.h"

namespace rocket {

namespace {

PlanKernel entry(const std::string& kernel, int bucket, const tiling::KernelTiles& t) {
  PlanKernel k{kernel, bucket, t.grid, t.threads, t.smem_bytes, {}};
  for (int i = 0; i < t.params; ++i) k.tile.emplace_back(t.param[i].name, t.param[i].value);
  return k;
}

// 16-row tiles of a group of projections of the same activations.
int tiles_of(std::initializer_list<int64_t> rows) {
  int t = 0;
  for (int64_t n : rows) t += int((n + 15) / 16);
  return t;
}

}  // namespace

std::vector<PlanKernel> select_kernels(const Plan& p) {
  if (p.booster == "host") return {};
  if (p.booster != "h200") fail("unknown booster '{}' (expected host or h200)", p.booster);
  if (p.limits.sms < 1 || p.limits.smem_per_block < 1)
    fail("plan: the h200 kernels are tiled from the profile's SM count and shared memory per block, which are {} and {}",
         p.limits.sms, p.limits.smem_per_block);
  const Chemistry& c = p.chemistry;
  const tiling::BoosterLimits& hw = p.limits;
  const int q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  const tiling::MoeDims moe{c.hidden, c.moe_inter, c.shared_inter, c.experts, c.top_k};
  const Precision gdn = c.precision(Role::kGdnProj), gdn_gate = c.precision(Role::kGdnGate);
  const Precision attn = c.precision(Role::kAttnProj), experts = c.precision(Role::kExperts);
  const Precision shared = c.precision(Role::kSharedExpert);
  // GDN's b|a ride in qkv|z's launch when they share its precision, else they are a launch of their own.
  const bool gate_apart = gdn_gate != gdn;
  std::vector<PlanKernel> k;
  for (int b : p.buckets) {
    if (gate_apart) {
      k.push_back(entry("dense_gdn_in", b, tiling::dense_tiles(c.hidden, b, tiles_of({c.conv_dim(), c.value_dim()}), hw, gdn)));
      k.push_back(entry("dense_gdn_gate", b, tiling::dense_tiles(c.hidden, b, tiles_of({c.lin_v_heads, c.lin_v_heads}), hw, gdn_gate)));
    } else {
      k.push_back(entry("dense_gdn_in", b,
                        tiling::dense_tiles(c.hidden, b, tiles_of({c.conv_dim(), c.value_dim(), c.lin_v_heads, c.lin_v_heads}), hw, gdn)));
    }
    k.push_back(entry("gdn_decode", b, tiling::gdn_decode_tiles(c.lin_v_heads, c.lin_k_dim, c.lin_v_dim, b)));
    k.push_back(entry("dense_gdn_out", b, tiling::dense_tiles(c.value_dim(), b, tiles_of({c.hidden}), hw, gdn)));
    k.push_back(entry("dense_attn_qkv", b, tiling::dense_tiles(c.hidden, b, tiles_of({2 * q, kv, kv}), hw, attn)));
    k.push_back(entry("attention_decode", b, tiling::attention_decode_tiles(c.heads, c.kv_heads, c.head_dim, b)));
    k.push_back(entry("dense_attn_o", b, tiling::dense_tiles(q, b, tiles_of({c.hidden}), hw, attn)));
    k.push_back(entry("dense_router", b, tiling::dense_tiles(c.hidden, b, tiles_of({c.experts}), hw, c.precision(Role::kRouter))));
    k.push_back(entry("moe_route", b, tiling::moe_route_tiles(moe, b)));
    k.push_back(entry("moe_gate_up", b, tiling::moe_gate_up_tiling(moe, b, experts, shared).tiles_of()));
    k.push_back(entry("moe_down", b, tiling::moe_down_tiling(moe, b, experts, shared).tiles_of()));
    k.push_back(entry("dense_lm_head", b, tiling::dense_tiles(c.hidden, b, tiles_of({c.vocab}), hw, c.precision(Role::kLmHead))));
    k.push_back(entry("sample", b, tiling::sample_tiles(c.vocab, b)));
  }
  return k;
}

}  // namespace rocket
