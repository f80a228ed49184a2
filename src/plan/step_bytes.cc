#include "plan/step_bytes.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace rocket {

double expected_expert_union(int experts, int top_k, int rows) {
  CHECK(top_k > 0 && top_k <= experts && rows >= 1, "an expert union needs 0 < top_k <= experts and a row");
  const double e = double(experts);
  return e * (1.0 - std::pow(1.0 - double(top_k) / e, rows));
}

StepBytes step_bytes(const Plan& plan, int bucket, double context) {
  CHECK(bucket >= 1 && context >= 0, "a step has at least one row and a non-negative context");
  const Chemistry& c = plan.chemistry;
  double embedding = 0, dense = 0, expert = 0;
  for (const auto& t : plan.tensors) {
    if (t.name.starts_with("embed_tokens")) {
      embedding += double(t.bytes);
      continue;
    }
    if (t.name.find(".mlp.experts.") != std::string::npos) {
      // Every expert of every layer has the same parts; layer 0's expert 0 stands for all of them.
      if (t.name.starts_with("layers.0.mlp.experts.0.")) expert += double(t.bytes);
      continue;
    }
    dense += double(t.bytes);
  }
  CHECK(embedding > 0 && expert > 0, "the plan holds no embedding or no routed expert");
  StepBytes s;
  s.weights = dense + double(bucket) * embedding / double(c.vocab);
  s.experts = expected_expert_union(c.experts, c.top_k, bucket) * double(c.layers) * expert;
  const double recurrent = double(c.lin_v_heads) * c.lin_k_dim * c.lin_v_dim;
  const double conv = double(c.conv_dim()) * (c.conv_kernel - 1);
  s.state = double(bucket) * c.linear_layers() * 2.0 * 4.0 * (recurrent + conv);
  s.kv = double(bucket) * c.full_layers() * context * 2.0 * c.kv_heads * c.head_dim * plan.kv_bytes;
  return s;
}

}  // namespace rocket
