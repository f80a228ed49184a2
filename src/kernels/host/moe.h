// Sparse MoE pieces: the router's top-k selection and the SwiGLU expert activation, FP32.
#pragma once

namespace rocket::host {

// softmax(logits) in fp32, the k largest probabilities (ties to the lower expert index), renormalised
// to sum to 1 (norm_topk_prob). idx[k], weight[k] come out in descending probability order, as
// torch.topk returns them. REQUIRES: 1 <= k <= E.
void router_top_k(const float* logits, int E, int k, int* idx, float* weight);

// out[i] = silu(gate[i]) * up[i]. out may alias gate or up.
void swiglu(const float* gate, const float* up, int n, float* out);

}  // namespace rocket::host
