#include "compiler/memory_map.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "cache/geometry.h"
#include "core/align.h"
#include "core/error.h"
#include "core/sampling_history.h"
#include "core/sampling_knobs.h"
#include "kernels/tiling/attention.h"
#include "kernels/tiling/dense.h"
#include "kernels/tiling/gdn.h"
#include "kernels/tiling/moe.h"

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

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// What the H200 kernels need beyond the activations both boosters share, sized from the kernels'
// tiling (kernels/tiling/*.h, the headers their traits are computed from) at every bucket: the
// engine runs decode at each bucket and prefill in pieces of those sizes.
void add_h200_buffers(Region& act, const Chemistry& c, const Plan& p) {
  const uint64_t S = p.max_streams, slots = uint64_t(p.max_streams) + 1;
  const uint64_t pages_per_stream = ceil_div(p.max_context, p.kv_page_tokens);
  // Per-step inputs of a decode step or a bucket-sized prefill piece: token ids, stream slots and
  // positions (int32 each), one SamplingKnobs per row, and each row's rotary position (three int32:
  // the multimodal rotary's time, height, width, which differ from the KV index for a prompt with
  // images and every token after it); the step's first kernel copies them here from the host's
  // pinned staging, in whole 16-byte vectors.
  act.add("step_inputs", align_up(S * (3 * 4 + sizeof(SamplingKnobs) + 3 * 4), 16));
  // Every stream's sampling history (core/sampling_history.h), read and counted by the sampler: output
  // token counts, the prompt's token bits, the logit bias.
  act.add("history_counts", S * c.vocab * 4);
  act.add("history_prompt", S * uint64_t(history_prompt_words(int(c.vocab))) * 4);
  act.add("history_bias", S * kMaxLogitBias * sizeof(LogitBias));
  // A token-path piece's inputs: ids, positions and rotary positions (three int32) of its rows, then
  // per stream slot of a batched piece its slot and its GDN chunks' captures.
  act.add("piece_inputs", (5 * uint64_t(p.prefill_chunk) + slots * (1 + tiling::gdn_chunks(p.prefill_chunk))) * 4);
  // cuBLAS's workspace for the token path's projections (its recommended 32 MiB on Hopper), so it
  // allocates nothing after upright.
  act.add("gemm_workspace", 32ull << 20);
  // The chunked gated delta rule's per-chunk records and pre-norm output for the largest piece.
  act.add("gdn_workspace", uint64_t(tiling::gdn_chunked_workspace_floats(c.lin_k_heads, c.lin_v_heads, c.lin_k_dim,
                                                                          c.lin_v_dim, p.prefill_chunk)) * 4);
  // KV page tables on the device, every slot's (bind_pages): a decode row reads its slot's.
  act.add("page_tables", slots * pages_per_stream * 4);
  const tiling::MoeDims moe{c.hidden, c.moe_inter, c.shared_inter, c.experts, c.top_k};
  const Precision experts = c.precision(Role::kExperts), shared = c.precision(Role::kSharedExpert);
  // The token path's MoE (kernels/cuda/moe_piece.cuh): routing, the expert groups, activations and
  // each routed pair's down output for the largest piece.
  act.add("moe_workspace", uint64_t(tiling::moe_piece_workspace(moe, p.prefill_chunk).bytes));
  uint64_t attn_partial = 0, route = 0, moe_partial = 0, arrivals = 0;
  for (int b : p.buckets) {
    attn_partial =
        std::max(attn_partial, uint64_t(tiling::attention_tiling(c.heads, c.kv_heads, c.head_dim, b).partial_floats) * 4);
    route = std::max(route, uint64_t(tiling::moe_route_layout(moe, b).ints()) * 4);
    const tiling::MoeGateUpTiling gate_up = tiling::moe_gate_up_tiling(moe, b, experts, shared);
    moe_partial = std::max(moe_partial, uint64_t(gate_up.partial_floats) * 4);
    arrivals = std::max(arrivals, uint64_t(gate_up.arrivals) * 4);
  }
  act.add("attn_partial", attn_partial);
  act.add("moe_route", route);
  // The decode expert kernels' activations: a bucket's rows at most (the token path has its own).
  act.add("moe_act", S * c.top_k * c.moe_inter * p.activation_bytes);
  act.add("shared_act", S * c.shared_inter * p.activation_bytes);
  act.add("moe_partial", moe_partial);
  act.add("moe_arrivals", arrivals);
  // The token path's projections of block-FP8 weights are cuBLAS BF16 GEMMs over a dequantised copy
  // (kernels/cuda/fp8_dequant.cuh): room for the largest; empty when no projection is FP8. An FP8 LM
  // head (a GiB as BF16 at a3b's vocabulary) is dequantised and multiplied in slices of kLmHeadSliceRows
  // rows instead: the piece needs its logits once, not a second copy of the head.
  const int64_t q = int64_t(c.heads) * c.head_dim, kv = int64_t(c.kv_heads) * c.head_dim;
  const std::pair<Role, std::vector<int64_t>> projections[] = {
      {Role::kAttnProj, {2 * q * c.hidden, kv * c.hidden, q * c.hidden}},
      {Role::kGdnProj, {int64_t(c.conv_dim()) * c.hidden, int64_t(c.value_dim()) * c.hidden}},
      {Role::kGdnGate, {int64_t(c.lin_v_heads) * c.hidden}},
      {Role::kRouter, {int64_t(c.experts) * c.hidden}}};
  uint64_t dequant = 0;
  for (const auto& [role, sizes] : projections)
    if (c.precision(role) == Precision::kFP8Block)
      for (int64_t n : sizes) dequant = std::max(dequant, uint64_t(n) * 2);
  if (c.precision(Role::kLmHead) == Precision::kFP8Block)
    dequant = std::max(dequant, uint64_t(std::min<int64_t>(c.vocab, tiling::kLmHeadSliceRows)) * c.hidden * 2);
  act.add("dequant", dequant);
  // The vision tower (plan_vision.h h200_vision_buffer_bytes): one image's inputs and the tower's
  // scratch, for the largest image the plan's processor admits, and the bf16 merged rows of a piece.
  if (p.vision) {
    const VisionBufferBytes v = h200_vision_buffer_bytes(*p.vision, p.prefill_chunk, int(c.hidden));
    act.add("vision_inputs", v.inputs);
    act.add("vision_scratch", v.scratch);
    act.add("image_rows", v.image_rows);
  }
}

// The host engine's MoE staging: routed rows gathered per expert, their gate, up and down outputs,
// and the shared expert's gate and up (the h200 kernels keep all of these in registers).
void add_host_buffers(Region& act, const Chemistry& c, const Plan& p) {
  const uint64_t M = p.max_rows, A = p.activation_bytes, routed = M * c.top_k;
  act.add("moe_in", routed * c.hidden * A);
  act.add("moe_gate", routed * c.moe_inter * A);
  act.add("moe_up", routed * c.moe_inter * A);
  act.add("moe_down", routed * c.hidden * A);
  act.add("shared_gate", M * c.shared_inter * A);
  act.add("shared_up", M * c.shared_inter * A);
}

// Speculative decoding (Plan::draft_tokens): each stream's hidden state the next MTP row reads (the
// main model's, after its final norm, at the stream's last position), the MTP rows' input (the
// normed embedding and hidden side by side, 2 x hidden), and one stream's recurrent state after each
// row of a verify step, so the stream keeps the state where its accepted tokens end.
void add_draft_buffers(Region& act, const Chemistry& c, const Plan& p) {
  const uint64_t slots = uint64_t(p.max_streams) + 1, A = p.activation_bytes;
  act.add("mtp_hidden", slots * c.hidden * A);
  act.add("mtp_in", uint64_t(p.max_rows) * 2 * c.hidden * A);
  act.add("verify_hidden", uint64_t(p.draft_tokens + 1) * c.hidden * A);
  act.add("verify_states", uint64_t(p.draft_tokens + 1) * SnapshotLayout::of(c).slot_bytes());
}

// The (layer, expert) of a routed expert's tensor, or {-1, -1}.
std::pair<int, int> expert_of(const std::string& name) {
  int layer = -1, expert = -1, used = 0;
  if (std::sscanf(name.c_str(), "layers.%d.mlp.experts.%d.%n", &layer, &expert, &used) == 2 && used > 0) return {layer, expert};
  return {-1, -1};
}

// Each layer's routed experts are one run of the manifest (expert 0's tensors, then 1's, ...): the run
// is stably sorted by unit, so an expert's parts keep their order and everything else its place.
void order_experts(std::vector<TensorSpec>& manifest, const std::vector<std::vector<int>>& units) {
  for (size_t i = 0; i < manifest.size();) {
    const int layer = expert_of(manifest[i].name).first;
    if (layer < 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < manifest.size() && expert_of(manifest[end].name).first == layer) ++end;
    const std::vector<int>& u = units.at(size_t(layer));
    std::stable_sort(manifest.begin() + long(i), manifest.begin() + long(end), [&](const TensorSpec& a, const TensorSpec& b) {
      return u.at(size_t(expert_of(a.name).second)) < u.at(size_t(expert_of(b.name).second));
    });
    i = end;
  }
}

}  // namespace

Plan plan_memory(const Chemistry& c, const PlanOptions& opt) {
  Plan p;
  p.booster = opt.booster;
  p.limits = opt.limits;
  p.chemistry = c;
  p.fingerprint = c.fingerprint();
  p.buckets = opt.buckets;
  std::sort(p.buckets.begin(), p.buckets.end());
  p.max_streams = p.buckets.back();
  p.max_context = opt.max_context ? opt.max_context : std::min(c.max_positions, opt.booster == "host" ? 2048 : 8192);
  p.prefill_chunk = opt.prefill_chunk ? opt.prefill_chunk : opt.booster == "host" ? 32 : 2048;
  p.max_rows = std::max(p.max_streams, p.prefill_chunk);
  // Logits cross for a decode step's rows, or for one LM-head pass over a prefill piece's rows that
  // want them (the h200 token path computes them a pass at a time): never a whole piece's.
  // The host engine keeps every row's logits.
  p.logit_rows = opt.booster == "host" ? p.max_rows : std::min(p.max_rows, std::max(p.max_streams, 32));
  // The host booster computes in fp32 throughout (it is the parity engine); the h200 engine keeps
  // activations and KV in bf16 and recurrent state in fp32.
  p.activation_bytes = opt.booster == "host" ? 4 : 2;
  p.kv_bytes = opt.booster == "host" ? 4 : 2;
  p.draft_tokens = opt.draft_tokens;
  p.vision = opt.vision;
  // The h200 engine runs the tower's attention at two head dims, and one image within one prefill
  // piece: its pixel bound follows the chunk (plan_vision.h).
  if (p.vision && p.booster == "h200") {
    check_h200_vision(*p.vision, "plan");
    bound_pixels_by_prefill_chunk(*p.vision, p.prefill_chunk, "plan");
  }

  // Weights: the manifest order, one 64 KiB-aligned unit per linear / expert / vector; a layer's
  // routed experts in their units' order (the MTP layer's in their own).
  std::vector<TensorSpec> manifest = p.weights_manifest();
  if (!opt.expert_units.empty()) {
    p.expert_order.units = opt.expert_units;
    order_experts(manifest, opt.expert_units);
  }
  uint64_t at = 0;
  std::string unit;
  for (const TensorSpec& t : manifest) {
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
  act.add("shared_scale", M * 4);
  act.add("moe_out", M * H * A);
  if (opt.booster == "h200") add_h200_buffers(act, c, p);
  else add_host_buffers(act, c, p);
  if (p.draft_tokens) add_draft_buffers(act, c, p);
  uint64_t end = act.end();

  Region logits(p, "logits", end);
  logits.add("logits", uint64_t(p.logit_rows) * c.vocab * 4);
  end = logits.end();

  // Stream slots: one per stream of the largest bucket, plus a padding sink that the rows of a bucket
  // beyond the active streams write to, so a bucket's shape never depends on how many are active.
  const uint64_t slots = uint64_t(p.max_streams) + 1;
  // KV pages: each stream slot owns ceil(max_context / page_tokens) pages per full-attention layer,
  // for K and for V. (The radix page pool that shares them between streams arrives with the cache.)
  const uint64_t pages_per_stream_layer = (p.max_context + p.kv_page_tokens - 1) / p.kv_page_tokens;
  p.kv_pages = int(slots * p.kv_layers() * pages_per_stream_layer * 2);
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

std::vector<int> buckets_up_to(int max_streams) {
  std::vector<int> b;
  for (int s = 1; s <= max_streams; s *= 2) b.push_back(s);
  return b;
}

int h200_max_streams(const Chemistry& chem, PlanOptions opt, uint64_t usable) {
  for (int s = tiling::kDenseMaxRows; s > 32; s /= 2) {
    if (opt.state_snapshots && opt.state_snapshots < 2 * s) continue;
    opt.buckets = buckets_up_to(s);
    if (plan_memory(chem, opt).arena_bytes <= usable) return s;
  }
  return 32;
}

}  // namespace rocket
