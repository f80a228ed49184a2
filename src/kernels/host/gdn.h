// Gated DeltaNet recurrent step (HF torch_recurrent_gated_delta_rule, one token, one stream).
//
// State: fp32 [Hv][Kd][Vd] per stream, zero for a fresh sequence; updated in place. Value head h
// reads key head h / (Hv/Hk): consecutive value heads share a key head (repeat_interleave).
// Per head, with q, k l2-normalised (x *= rsqrt(sum x² + 1e-6)) and q further scaled by 1/sqrt(Kd):
//   S *= exp(g[h]);  delta = (v - Sᵀk) * beta[h];  S += k deltaᵀ;  out = Sᵀq.
// The caller's q and k are not modified.
#pragma once

namespace rocket::host {

// q, k [Hk][Kd]; v [Hv][Vd]; g [Hv] (log decay, <= 0); beta [Hv]; out [Hv][Vd].
// REQUIRES: Hv % Hk == 0; out does not alias state, q or k.
void gdn_step(float* state, const float* q, const float* k, const float* v, const float* g,
              const float* beta, int Hk, int Hv, int Kd, int Vd, float* out);

}  // namespace rocket::host
