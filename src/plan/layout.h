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

}  // namespace rocket
