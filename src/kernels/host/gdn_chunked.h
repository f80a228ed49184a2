// Gated DeltaNet over a piece of one stream in chunks (the WY / UT-transform form of the delta rule);
// the host reference of kernels/cuda/gdn_chunked.cuh. It computes what n calls of host::gdn_step
// compute (kernels/host/gdn.h), token for token, within fp32 rounding.
//
// Per value head, for a chunk of C tokens starting from state S0, with gc_t = sum_{i<=t} g_i the
// chunk's cumulative log decay (G_t = exp(gc_t)) and q, k l2-normalised (q also scaled by 1/sqrt(Kd)):
//   A[t][i] = beta_t (k_t . k_i) G_t/G_i for i < t         (strictly lower triangular)
//   W = (I + A)^-1 diag(beta) (G ⊙ K),  U = (I + A)^-1 diag(beta) V
//   U' = U - W S0                                          (row t is token t's delta of the sequential rule)
//   O  = (G ⊙ Q) S0 + tril_incl(Q Kᵀ ⊙ G_t/G_i) U'
//   S_end = G_C S0 + (K ⊙ G_C/G)ᵀ U'
// Why it holds: unrolling S_t = decay_t S_{t-1} + k_t delta_tᵀ inside the chunk gives
// S_t = G_t S0 + sum_{i<=t} (G_t/G_i) k_i delta_iᵀ, so the sequential delta_t = beta_t (v_t - (decay_t
// S_{t-1})ᵀ k_t) is delta_t + sum_{i<t} A[t][i] delta_i = beta_t v_t - beta_t G_t S0ᵀ k_t, a unit lower
// triangular system whose solution is U - W S0; o_t = S_tᵀ q_t and S_end = S_C follow from the same
// unrolled sum.
//
// Chunks are aligned to absolute positions: chunk boundaries lie at multiples of C, so the piece's
// first chunk runs from pos0 to the next multiple (shorter when pos0 % C != 0) and its last ends at
// pos0 + n. The cumulative log decay is summed in double: G_t/G_i = exp(gc_t - gc_i) then carries one
// rounding instead of one per token of the chunk.
#pragma once

#include <functional>

namespace rocket::host {

// Tokens per chunk: the GPU kernel's tile (kernels/tiling/gdn.h kGdnChunk has the same value).
inline constexpr int kGdnChunkTokens = 64;

// Called after every chunk that ends on a multiple of C, with that absolute position and the state
// [Hv][Kd][Vd] there (valid during the call only).
using GdnChunkState = std::function<void(int pos, const float* state)>;

// n tokens of one stream at absolute positions pos0 .. pos0 + n - 1, inputs as host::gdn_step takes
// them, token-major: q, k [n][Hk][Kd] (raw: l2-normalised and scaled here); v [n][Hv][Vd]; g [n][Hv]
// (log decay, <= 0); beta [n][Hv]; out [n][Hv][Vd]. state [Hv][Kd][Vd] is updated in place.
// REQUIRES: n >= 1, pos0 >= 0, Hv % Hk == 0; out does not alias the inputs or state.
void gdn_chunked(float* state, const float* q, const float* k, const float* v, const float* g, const float* beta,
                 int n, int pos0, int Hk, int Hv, int Kd, int Vd, float* out, const GdnChunkState& on_chunk_end = {});

}  // namespace rocket::host
