// The manifest: every tensor a fuel of a given chemistry holds, with its checkpoint dtype and shape,
// named exactly as Qwen3.5-MoE checkpoints on the Hub name them. Forge writes it, the fuel loader
// checks a checkpoint against it (missing / extra / misshaped), the compiler conditions from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "fuel/chemistry.h"

namespace rocket {

// What a stored tensor is, for a quantised weight: the values or one of their scales.
enum class Part : uint8_t { kWeight, kScaleInv128 /*fp8 block*/, kScale16 /*nvfp4 e4m3*/, kScale2, kInputScale, kPlain };

struct TensorSpec {
  std::string name;             // canonical: "layers.0.linear_attn.in_proj_qkv.weight", "embed_tokens.weight", "lm_head.weight"
  DType dtype;
  std::vector<int64_t> shape;   // checkpoint shape (packed FP4 has K/2 bytes per row)
  Part part = Part::kPlain;
  Precision precision = Precision::kBF16;
  int64_t rows = 0, cols = 0;   // logical [out, in] of the weight this tensor belongs to
  uint64_t nbytes() const;
};

// Layouts transformers writes for this chemistry: text-only `model.layers.*` or multimodal
// `model.language_model.layers.*`. The LM head is `lm_head.weight` in both.
enum class Layout : uint8_t { kText, kMultimodal };

std::string checkpoint_name(const std::string& canonical, Layout layout);

// The unit a tensor belongs to: all parts of one linear ("layers.0.self_attn.q_proj"), or all three
// projections of one expert ("layers.0.mlp.experts.3"). The compiler gives each unit one 64 KiB-aligned
// span so a weight (or a routed expert) is one contiguous aligned read.
std::string weight_unit(const std::string& canonical_name);

// The family of a weight across layers and experts: "layers.3.mlp.experts.17.up_proj.weight" ->
// "layers.*.mlp.experts.*.up_proj.weight". What refusals name instead of thousands of tensors.
std::string weight_family(const std::string& canonical_name);

// Every tensor of a fuel of chemistry `c`, in a deterministic order (layer by layer).
std::vector<TensorSpec> fuel_manifest(const Chemistry& c);

// The MTP draft layer a checkpoint with `mtp_num_hidden_layers` stores beside the model (empty when it
// has none), as Qwen3.5 releases do under `mtp.` in either layout: `fc` (hidden x 2·hidden, over
// [normed embedding of the next token, normed last hidden state]), the two input norms, `layers.0`
// (a full-attention decoder layer with the MoE block, the main layers' shapes) and `norm`; it shares
// the model's embedding and LM head. BF16 in every format, as the releases keep it (ModelOpt
// excludes `mtp*`). Not part of any plan yet: the loader checks it, no engine drafts with it.
std::vector<TensorSpec> mtp_manifest(const Chemistry& c);

}  // namespace rocket
