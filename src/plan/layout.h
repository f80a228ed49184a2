// Where one layer's weights sit in the arena: the shapes of the tables the compiler generates into
// engine.h as constexpr data. Offsets are absolute arena offsets, except inside ExpertAt, which is
// relative to the start of one expert's 64 KiB-aligned unit (unit e of layer l starts at
// LayerAt::experts + e * kExpertStride).
#pragma once

#include <cstdint>

namespace rocket {

// A linear weight and, when quantised, its scales (fp8: scale = weight_scale_inv blocks;
// nvfp4: scale = e4m3 per-16 scales, scale2 = the fp32 global scale). 0 = absent.
struct LinearAt {
  uint64_t weight = 0, scale = 0, scale2 = 0;
};

struct GdnAt {
  LinearAt qkv, z, b, a, out;
  uint64_t conv = 0, dt_bias = 0, a_log = 0, norm = 0;
};

struct AttnAt {
  LinearAt q, k, v, o;
  uint64_t q_norm = 0, k_norm = 0;
};

struct ExpertAt {
  LinearAt gate, up, down;
};

struct LayerAt {
  uint64_t input_norm = 0, post_norm = 0;
  GdnAt gdn;    // linear-attention layers only
  AttnAt attn;  // full-attention layers only
  LinearAt router, shared_gate, shared_up, shared_down, shared_expert_gate;
  uint64_t experts = 0;
};

// A drafting plan's MTP layer (Plan::draft_tokens; zeros otherwise): fc over [normed embedding of
// the next token, normed hidden state], one full-attention decoder layer with its own MoE, and its
// final norm; it shares the model's embedding and LM head. Every part is BF16, so its experts have
// their own stride and layout (unit e at layer.experts + e * expert_stride, in expert id order).
struct MtpAt {
  LinearAt fc;
  uint64_t norm_embedding = 0, norm_hidden = 0, final_norm = 0;
  LayerAt layer;
  ExpertAt expert;
  uint64_t expert_stride = 0;
};

}  // namespace rocket
