#include "compiler/memory_map.h"

#include <algorithm>

#include "cache/geometry.h"
#include "core/align.h"
#include "core/error.h"

namespace rocket {

namespace {

constexpr uint64_t kPartAlign = 256;  // within a unit: enough for 128-byte vector/TMA loads

struct Region {
  Plan& plan;
  PlanRegion r;
  Region(Plan& p, std::string name, uint64_t at) : plan(p), r{std::move(name), at, 0} {}
  void add(const std::string& name, uint64_t bytes) {
    plan.buffers.push_back({name, r.name, r.offset + r.bytes, bytes});
    r.bytes += align_up(bytes);
  }
  uint64_t end() { plan.regions.push_back(r); return r.offset + r.bytes; }
};

// Ceil division for the tile arithmetic below.
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// What the H200 kernels need beyond the activations both boosters share. Sizes mirror the kernels'
// constexpr traits (named at each line); the engine static_asserts every buffer against the traits
// it was compiled with, so a drift between the two fails the engine build, never a run. Row counts
// are every bucket: the engine runs decode at each bucket and prefill in pieces of those sizes.
void add_h200_buffers(Region& act, const Chemistry& c, const Plan& p) {
  const uint64_t M = p.max_rows, slots = uint64_t(p.max_streams) + 1;
  const uint64_t pages_per_stream = ceil_div(p.max_context, p.kv_page_tokens);
  // Per-step inputs: token ids, stream slots and positions (int32 each), then one 32-byte
  // cuda::SampleRow per row; the step's first kernel copies them here from the host's pinned staging.
  act.add("step_inputs", M * (3 * 4 + 32));
  // KV page tables on the device, every slot's (bind_pages): a decode row reads its slot's.
  act.add("page_tables", slots * pages_per_stream * 4);
  uint64_t attn_partial = 0, route = 0, moe_partial = 0, arrivals = 0;
  for (int b : p.buckets) {
    // attention_decode.cuh AttentionTiles<S, b>: kSplits = max(1, kTargetBlocks 256 / (b · kv_heads)),
    // kPartialFloats = b · heads · kSplits · (hd + 2).
    const uint64_t splits = std::max<uint64_t>(1, 256 / (uint64_t(b) * c.kv_heads));
    attn_partial = std::max(attn_partial, uint64_t(b) * c.heads * splits * (c.head_dim + 2) * 4);
    // moe_dispatch.cuh MoeRoute<D, b>: active, expert[kMaxActive], start[kMaxActive + 1], slot_row and
    // slot_of [b · top_k], all int.
    const uint64_t route_slots = uint64_t(b) * c.top_k;
    const uint64_t max_active = std::min<uint64_t>(c.experts, route_slots);
    route = std::max(route, 4 * (1 + max_active + max_active + 1 + 2 * route_slots));
    // moe_experts.cuh MoeGateUpTraits<D, b, P>: the shared expert's K slices and their partial sums,
    // and its tile groups (one arrival counter each), from ExpertTilePlan's arithmetic.
    struct TilePlan {
      uint64_t rounds_total, tiles_per_block;
    };
    const auto tile_plan = [](bool nvfp4, uint64_t k, uint64_t m, uint64_t warps, uint64_t loads) {
      const uint64_t stage_k = 4 * (nvfp4 ? 32 : 8), stages = ceil_div(k, stage_k);
      const uint64_t g = std::min<uint64_t>(loads / (2 * m), stages), parts = stages / g;
      const uint64_t warps_per_tile = std::min(warps, parts);
      return TilePlan{parts / warps_per_tile, warps / warps_per_tile};
    };
    // MoeGateUpTraits: NVFP4 experts from bucket 8 take one stage per round (4 loads per lane, kNarrow),
    // in blocks of 4 warps except at bucket 16 (kSmallBlocks); otherwise 8 warps, 8 loads.
    const bool nvfp4 = c.precision(Role::kExperts) == Precision::kNVFP4, narrow = nvfp4 && b >= 8;
    const uint64_t warps = narrow && b != 16 ? 4 : 8;
    const uint64_t routed_rounds = tile_plan(nvfp4, c.hidden, 2, warps, narrow ? 4 : 8).rounds_total;
    const TilePlan shared = tile_plan(false, c.hidden, 2, warps, 8);
    const uint64_t shared_rounds = shared.rounds_total;
    const uint64_t shared_slices =
        shared_rounds > routed_rounds && shared_rounds % routed_rounds == 0 ? shared_rounds / routed_rounds : 1;
    const uint64_t n_tiles = ceil_div(b, 8);
    if (shared_slices > 1)
      moe_partial = std::max(moe_partial, (c.shared_inter / 16) * shared_slices * n_tiles * 2 * 32 * 4 * 4);
    arrivals = std::max(arrivals, 4 * ceil_div(c.shared_inter / 16, shared.tiles_per_block));
  }
  act.add("attn_partial", attn_partial);
  act.add("moe_route", route);
  act.add("moe_act", M * c.top_k * c.moe_inter * p.activation_bytes);
  act.add("shared_act", M * c.shared_inter * p.activation_bytes);
  act.add("moe_partial", std::max<uint64_t>(moe_partial, 4));
  act.add("moe_arrivals", arrivals);
}

}  // namespace

Plan plan_memory(const Chemistry& c, const PlanOptions& opt) {
  Plan p;
  p.booster = opt.booster;
  p.chemistry = c;
  p.fingerprint = c.fingerprint();
  p.buckets = opt.buckets;
  std::sort(p.buckets.begin(), p.buckets.end());
  p.max_streams = p.buckets.back();
  p.max_context = opt.max_context ? opt.max_context : std::min(c.max_positions, opt.booster == "host" ? 2048 : 8192);
  p.prefill_chunk = opt.prefill_chunk;
  p.max_rows = std::max(p.max_streams, p.prefill_chunk);
  // The host booster computes in fp32 throughout (it is the parity engine); the h200 engine keeps
  // activations and KV in bf16 and recurrent state in fp32.
  p.activation_bytes = opt.booster == "host" ? 4 : 2;
  p.kv_bytes = opt.booster == "host" ? 4 : 2;

  // Weights: the manifest order, one 64 KiB-aligned unit per linear / expert / vector.
  uint64_t at = 0;
  std::string unit;
  for (const TensorSpec& t : fuel_manifest(c)) {
    std::string u = weight_unit(t.name);
    at = u != unit ? align_up(at) : align_up(at, kPartAlign);
    unit = u;
    p.tensors.push_back({t.name, t.dtype, t.shape, at, t.nbytes()});
    at += t.nbytes();
  }
  p.blob_bytes = align_up(at);
  p.regions.push_back({"weights", 0, p.blob_bytes});
  std::sort(p.tensors.begin(), p.tensors.end(), [](auto& a, auto& b) { return a.name < b.name; });

  const uint64_t M = p.max_rows, A = p.activation_bytes, H = c.hidden;
  const uint64_t heads_hd = uint64_t(c.heads) * c.head_dim, kv_hd = uint64_t(c.kv_heads) * c.head_dim;
  const uint64_t routed = M * c.top_k;
  // KV page geometry first: the h200 page tables below are sized from it. A page is 64 KiB of one
  // layer's K (or V) for kv_page_tokens tokens.
  const uint64_t token_bytes = kv_hd * p.kv_bytes;
  p.kv_page_tokens = int(std::max<uint64_t>(1, kAlign / token_bytes));
  p.kv_page_bytes = align_up(p.kv_page_tokens * token_bytes);

  Region act(p, "activations", p.blob_bytes);
  act.add("x", M * H * A);
  act.add("hn", M * H * A);
  act.add("mix", M * std::max<uint64_t>(c.conv_dim(), 2 * heads_hd) * A);
  act.add("mixc", M * c.conv_dim() * A);
  act.add("z", M * c.value_dim() * A);
  act.add("gdn_a", M * c.lin_v_heads * A);
  act.add("gdn_b", M * c.lin_v_heads * A);
  act.add("k", M * kv_hd * A);
  act.add("v", M * kv_hd * A);
  act.add("core", M * std::max<uint64_t>(c.value_dim(), heads_hd) * A);
  act.add("attn_out", M * H * A);
  act.add("router", M * c.experts * 4);
  act.add("route_idx", routed * 4);
  act.add("route_w", routed * 4);
  act.add("moe_in", routed * H * A);
  act.add("moe_gate", routed * c.moe_inter * A);
  act.add("moe_up", routed * c.moe_inter * A);
  act.add("moe_down", routed * H * A);
  act.add("shared_gate", M * c.shared_inter * A);
  act.add("shared_up", M * c.shared_inter * A);
  act.add("shared_out", M * H * A);
  act.add("shared_scale", M * 4);
  act.add("moe_out", M * H * A);
  act.add("scores", uint64_t(c.heads) * p.max_context * 4);
  if (opt.booster == "h200") add_h200_buffers(act, c, p);
  uint64_t end = act.end();

  Region logits(p, "logits", end);
  logits.add("logits", M * uint64_t(c.vocab) * 4);
  end = logits.end();

  // Stream slots: one per stream of the largest bucket, plus a padding sink that the rows of a bucket
  // beyond the active streams write to, so a bucket's shape never depends on how many are active.
  const uint64_t slots = uint64_t(p.max_streams) + 1;
  // KV pages: each stream slot owns ceil(max_context / page_tokens) pages per full-attention layer,
  // for K and for V. (The radix page pool that shares them between streams arrives with the cache.)
  const uint64_t pages_per_stream_layer = (p.max_context + p.kv_page_tokens - 1) / p.kv_page_tokens;
  p.kv_pages = int(slots * c.full_layers() * pages_per_stream_layer * 2);
  Region kv(p, "kv_pages", end);
  kv.add("kv_cache", uint64_t(p.kv_pages) * p.kv_page_bytes);
  end = kv.end();

  Region state(p, "recurrent_state", end);
  state.add("gdn_state", slots * c.linear_layers() * c.lin_v_heads * c.lin_k_dim * c.lin_v_dim * 4);
  state.add("conv_state", slots * c.linear_layers() * c.conv_dim() * (c.conv_kernel - 1) * 4);
  end = state.end();

  // Prefix-cache snapshots: conv + recurrent state of every linear-attention layer at one token
  // boundary each (src/cache/geometry.h), so a request sharing a prefix resumes bit-exactly.
  p.state_snapshots = opt.state_snapshots ? opt.state_snapshots : 2 * p.max_streams;
  // Each running stream pins up to one snapshot and resumes from another (cache/README.md).
  if (p.state_snapshots < 2 * p.max_streams)
    fail("plan: {} state snapshots is fewer than the prefix cache needs: 2 per stream, {}", p.state_snapshots,
         2 * p.max_streams);
  Region snapshots(p, "state_snapshots", end);
  snapshots.add("state_snapshots", uint64_t(p.state_snapshots) * SnapshotLayout::of(c).slot_bytes());
  end = snapshots.end();

  p.arena_bytes = align_up(end);
  return p;
}

}  // namespace rocket
