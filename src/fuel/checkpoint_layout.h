// Checkpoint layout: where each manifest tensor lives in a checkpoint of a given layout. The manifest
// names one tensor per weight part and expert; a checkpoint may store several of them as one tensor
// (the fused routed experts of the official Qwen3.5 releases), so a stored tensor is the row-major
// concatenation of its pieces. Forge writes stored tensors from this list and the fuel loader cuts
// the manifest's views out of them, so a fuel of any layout yields the same manifest bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "fuel/manifest.h"

namespace rocket {

// How the routed experts are stored. kPerExpert: `mlp.experts.{e}.{gate,up,down}_proj.<part>`, what
// transformers' save_pretrained writes per expert. kFused: per layer `mlp.experts.gate_up_proj`
// [E, 2·I, H] (each expert's gate rows, then its up rows) and `mlp.experts.down_proj` [E, H, I], as
// the official bf16 Qwen3.5 / Qwen3.6 releases and transformers 5 models keep them.
enum class ExpertLayout : uint8_t { kPerExpert, kFused };

const char* expert_layout_name(ExpertLayout e);          // "per-expert" | "fused"
ExpertLayout parse_expert_layout(const std::string& s);  // Error otherwise

// Tensors a checkpoint carries for parts this compiler does not build yet (the vision tower, the MTP
// head): recognised by prefix, counted, recorded in the plan, and not loaded.
struct UnusedTensors {
  std::string part;    // "vision" | "mtp"
  std::string prefix;  // the checkpoint prefix they were recognised by, e.g. "model.visual."
  int64_t tensors = 0;
  uint64_t bytes = 0;
  bool operator==(const UnusedTensors&) const = default;
};

struct StoredTensor {
  std::string name;             // checkpoint name, e.g. "model.language_model.layers.0.mlp.experts.gate_up_proj"
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<size_t> pieces;   // indices into the manifest, concatenated in this order
  uint64_t nbytes() const;
};

// The stored tensors of a checkpoint of chemistry `c` in this layout, in manifest order (a fused
// tensor sits where its first piece was). Error when the combination has no defined layout: fused
// experts are bf16 only (block-FP8 and NVFP4 releases store each expert with its own scales).
std::vector<StoredTensor> stored_tensors(const std::vector<TensorSpec>& manifest, const Chemistry& c, Layout layout,
                                         ExpertLayout experts);

}  // namespace rocket
