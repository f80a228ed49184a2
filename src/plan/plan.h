// Plan: what the compiler emits and the engine maps. Shared by both; plain data plus validation.
//
// One address space, the arena: the conditioned weight blob occupies [0, blob_bytes) and every
// runtime buffer (activations, KV pages, recurrent and conv state, logits) sits after it at a
// literal 64 KiB-aligned offset. The h200 engine allocates the whole arena once on the device; the
// host engine maps weights.blob for the first part and allocates the rest once at startup.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "fuel/checkpoint_layout.h"
#include "fuel/chemistry.h"
#include "fuel/manifest.h"
#include "kernels/tiling/booster.h"

namespace rocket {

// Version 2: an h200 plan's NVFP4 parts are stored in the register code (compiler/nvfp4_code.h).
// Version 3: the kernel table is data (PlanKernel) and the plan records its booster's limits.
constexpr int kPlanVersion = 4;

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
  uint64_t blob_bytes = 0;             // weights region = weights.blob size
  uint64_t arena_bytes = 0;            // whole arena (weights + runtime), the plan's residency
  std::vector<PlanRegion> regions;
  std::vector<PlanTensor> tensors;
  std::vector<PlanBuffer> buffers;
  tiling::BoosterLimits limits;        // of the hardware profile the kernels were tiled for
  std::vector<PlanKernel> kernels;     // h200: every kernel the engine tiles, at every bucket; host: none
  StaticFire static_fire;

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
};

}  // namespace rocket
