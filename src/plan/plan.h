// Plan: what the compiler emits and the engine maps. Shared by both; plain data plus validation.
//
// One address space, the arena: the conditioned weight blob occupies [0, blob_bytes) and every
// runtime buffer (activations, KV pages, recurrent and conv state, logits) sits after it at a
// literal 64 KiB-aligned offset. The h200 engine allocates the whole arena once on the device; the
// host engine maps weights.blob for the first part and allocates the rest once at startup.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "fuel/checkpoint_layout.h"
#include "fuel/chemistry.h"
#include "fuel/manifest.h"
#include "kernels/tiling/booster.h"
#include "plan/plan_vision.h"

namespace rocket {

// Version 2: an h200 plan's NVFP4 parts are stored in the register code (compiler/nvfp4_code.h).
// Version 3: the kernel table is data (PlanKernel) and the plan records its booster's limits.
constexpr int kPlanVersion = 4;

// The most tokens one draft proposes (Plan::draft_tokens): past a few, the chance that all are
// accepted falls faster than a verify step's cost grows.
constexpr int kMaxDraftTokens = 7;

// One stored part of one weight in the blob (a quantised weight has several parts).
struct PlanTensor {
  std::string name;        // canonical fuel name, e.g. "layers.0.mlp.experts.3.up_proj.weight_scale"
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t offset = 0, bytes = 0;  // in the arena (within the weights region)
};

struct PlanBuffer {
  std::string name;        // "x", "kv_cache", "gdn_state", ...
  std::string region;      // which region of the memory map it belongs to
  uint64_t offset = 0, bytes = 0;
};

struct PlanRegion {
  std::string name;
  uint64_t offset = 0, bytes = 0;
};

// The compiler's choice for one kernel at one bucket (kernels/tiling/*.h): its launch and the tile
// parameters the engine's kernels are compiled with. engine.h carries them as constexpr and the h200
// engine static_asserts its kernels' traits against them.
struct PlanKernel {
  std::string kernel;  // "moe_gate_up", "dense_lm_head", ...
  int bucket = 0;
  int64_t grid = 0;    // blocks
  int threads = 0;     // per block
  int smem_bytes = 0;  // shared memory per block
  std::vector<std::pair<std::string, int64_t>> tile;  // named tile parameters
  bool operator==(const PlanKernel&) const = default;
};

// The static-fire check the countdown runs before launch: greedy decoding of `prompt` must give `token`.
// Taken from the reference's golden vectors at build time (`rocket build --golden`), choosing the
// prompt whose first token wins by the widest margin, so an engine within its tolerance always passes.
struct StaticFire {
  std::vector<int32_t> prompt;  // empty: the build had no golden, and static fire only warms up
  int32_t token = -1;
  float margin = 0;             // the reference's top-1 minus top-2 logit there
  std::string source;           // the golden file
};

// The arrangements of a rocket's boosters (docs/glossary.md: booster count is part of a rocket's
// identity). Replicated: a full engine per booster on the same fuel, behind one front (src/front).
// Split: one engine spans the boosters, each holding its share of every layer's routed experts and
// exchanging the routed rows each MoE layer (host boosters run it; the h200 split engine is not built
// yet: upright refuses it).
constexpr const char* kReplicated = "replicated";
constexpr const char* kSplit = "split";

// Split: how a MoE layer's routed rows cross between boosters. Each row goes to the booster holding
// its expert and its weighted output comes back: one all-to-all each way per MoE layer, of exactly
// the routed rows (no padding to a per-expert capacity).
struct PlanExchange {
  std::string pattern = "all_to_all";  // dispatch + combine, every booster with every other
  std::string transport = "nccl";
  int moe_layers = 0;                  // exchanges per step, each way
  int64_t decode_rows = 0;             // routed rows of a decode step at the largest bucket (max_streams × top_k)
  int64_t prefill_rows = 0;            // of one prefill call (prefill_chunk × top_k)
  uint64_t row_bytes = 0;              // one row, each way (hidden × activation_bytes)
  bool operator==(const PlanExchange&) const = default;
};

// The rocket's boosters. plan.json holds it under "boosters" only when there is more than one or the
// arrangement is split; a plan without it is one booster, replicated (every plan before issue 27).
struct PlanBoosters {
  int count = 1;
  std::string arrangement = kReplicated;
  // h200: the device every booster must be (the hardware profile's name), which launch checks.
  std::string device_name;
  // Split: [layer][booster] = the experts that booster holds, in unit order; booster b's units follow
  // booster b-1's, so it holds one contiguous range of units per layer (compiler/placement.h).
  std::vector<std::vector<std::vector<int>>> placement;
  uint64_t residency = 0;  // split: the bytes one booster holds (the arena less the others' experts)
  PlanExchange exchange;   // split
  bool present() const { return count != 1 || arrangement != kReplicated; }
  bool operator==(const PlanBoosters&) const = default;
};

// The blob's order of each layer's routed experts, when a co-activation profile (or a split
// placement) chose one: "expert_order" in plan.json, absent for the identity (unit = expert id).
// The engine maps the router's expert ids to units through it (engine.h kExpertUnit).
struct PlanExpertOrder {
  std::string source;                   // the co-activation profile it came from (informational)
  std::vector<std::vector<int>> units;  // [layer][expert] = its unit; empty: the identity
  bool operator==(const PlanExpertOrder&) const = default;
};

struct Plan {
  int version = kPlanVersion;
  std::string booster;                 // "host" | "h200"
  Chemistry chemistry;
  std::string fingerprint;             // chemistry.fingerprint() at build time
  std::string fuel_dir;                // the fuel the blob was conditioned from (informational)
  // Its checkpoint layout and the tensors it carries for parts no engine builds yet (vision tower, MTP
  // head), informational like fuel_dir: a fuel of this chemistry in any layout burns in this engine.
  std::string fuel_layout;             // e.g. "multimodal names, fused experts"; empty for a --no-weights build
  std::vector<UnusedTensors> unused_tensors;
  std::vector<int> buckets;            // compiled decode batch sizes
  int max_streams = 0;                 // = largest bucket; there are max_streams + 1 stream slots, the
                                       // last being the sink for a bucket's rows beyond the active streams
  int max_context = 0;                 // tokens per stream
  int prefill_chunk = 0;               // tokens per prefill call (h200: the token path's largest piece)
  int max_rows = 0;                    // rows of every activation buffer = max(max_streams, prefill_chunk)
  int logit_rows = 0;                  // rows of the logits buffer: a decode step's, or one LM-head pass of a piece
  int activation_bytes = 4, kv_bytes = 4;  // element widths the engine's kernels use
  int kv_page_tokens = 0;              // tokens per KV page; a page is a 64 KiB multiple
  uint64_t kv_page_bytes = 0;
  int kv_pages = 0;
  int state_snapshots = 0;             // conv + recurrent state snapshots the prefix cache keeps
  // Speculative decoding with the checkpoint's MTP layer (docs/speculative.md): the tokens one draft
  // proposes per stream and step, a compiled constant; 0: the engine does not draft. A drafting plan
  // carries the MTP layer in its blob and gives it a KV layer of its own (kv_layers()).
  int draft_tokens = 0;
  // The vision tower the blob carries, after the text model and a drafting plan's MTP layer
  // (plan_vision.h): plans of a fuel that holds one, host or h200 (an h200 one with its pixel bound
  // lowered to one prefill piece and the tower's buffers); absent otherwise.
  std::optional<PlanVision> vision;
  uint64_t blob_bytes = 0;             // weights region = weights.blob size
  uint64_t arena_bytes = 0;            // whole arena (weights + runtime), the plan's residency
  std::vector<PlanRegion> regions;
  std::vector<PlanTensor> tensors;
  std::vector<PlanBuffer> buffers;
  tiling::BoosterLimits limits;        // of the hardware profile the kernels were tiled for
  std::vector<PlanKernel> kernels;     // h200: every kernel the engine tiles, at every bucket; host: none
  StaticFire static_fire;
  // The quality gate a changed precision map passed (`rocket build --precision ... --gate REPORT`):
  // the report's path, thresholds and figures; null for the fuel's own map or an ungated one.
  // Informational, like fuel_dir.
  nlohmann::json precision_gate;
  PlanBoosters boosters;
  PlanExpertOrder expert_order;

  // The unit of expert e in `layer` (e itself without an expert order).
  int expert_unit(int layer, int expert) const;
  // The full-attention layers a cache page holds KV for: the model's, then a drafting plan's MTP layer.
  int kv_layers() const { return chemistry.full_layers() + (draft_tokens ? chemistry.mtp_layers : 0); }
  // The weights the blob holds, in blob order before expert ordering: the model's, then a drafting
  // plan's MTP layer (always BF16, as the releases store it), then the vision tower it carries (BF16).
  std::vector<TensorSpec> weights_manifest() const;
  // Whether the blob stores each layer's router rows in unit order (row u: the router row of the expert
  // at unit u). An h200 plan with an expert order does, so its kernels, which take the router's choice
  // as the unit, run it unchanged: relabelling experts is a symmetry of the MoE (the logits change only
  // by float summation order, and an exact tie breaks to the lower unit rather than the lower id).
  // The host engine maps ids to units itself (engine.h kExpertUnit) and reads the checkpoint's router.
  bool router_in_unit_order() const { return booster == "h200" && !expert_order.units.empty(); }
  // The router tensor of `layer` (conditioning and fingerprints find it by this name).
  static std::string router_name(int layer);
  // A digest of everything the engine runs from (to_json less the informational fields: fuel_dir,
  // fuel_layout, unused_tensors, precision_gate, static_fire.source, expert_order.source), 16 hex digits: two
  // replicas with the same plan fingerprint run the same plan.
  std::string plan_fingerprint() const;

  const PlanTensor& tensor(const std::string& name) const;   // Error if absent
  const PlanTensor* find_tensor(const std::string& name) const;
  const PlanBuffer& buffer(const std::string& name) const;   // Error if absent

  nlohmann::json to_json() const;
  // Parses and validates; Error names the file and the field.
  static Plan from_json(const nlohmann::json& j, const std::string& path);
  static Plan load(const std::string& path);
  // Offsets aligned, inside their region, regions disjoint and inside the arena, no overlaps,
  // fingerprint consistent with the chemistry; the kernel table covers every bucket once per kernel,
  // with launches the booster can run.
  void validate(const std::string& path) const;

 private:
  void validate_kernels(const std::string& path) const;
  void validate_experts(const std::string& path) const;
};

}  // namespace rocket
