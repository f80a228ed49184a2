// The roofline's bytes per decode step (plan/step_bytes.h), on the tiny chemistry's host plan where
// every number can be worked by hand: hidden 128, vocab 151936, 3 linear-attention layers and 1
// full-attention layer, 16 experts top-4 with intermediate 64, bf16 weights, fp32 KV and state.
#include <gtest/gtest.h>

#include "compiler/memory_map.h"
#include "fuel/forge.h"
#include "plan/step_bytes.h"

namespace rocket {
namespace {

Plan tiny_plan() {
  const Chemistry c = chemistry_from_config(forge_config("tiny", 0), WeightFormat::kBF16, "tiny/config.json");
  return plan_memory(c, PlanOptions{.booster = "host"});
}

TEST(StepBytes, TinyByHand) {
  const Plan p = tiny_plan();
  const StepBytes b1 = step_bytes(p, 1, 72);
  // Non-expert weights, in parameters: LM head 151936·128 + final norm 128; per GDN layer qkv 256·128,
  // z 128·128, b and a 4·128 each, conv 256·4, dt_bias 4, A_log 4, norm 32, out 128·128 (67624); the
  // attention layer q|gate 256·128, k and v 64·128 each, o 128·128, q and k norms 32 each (65600); per
  // layer two norms, router 16·128, shared expert 3·64·128, shared gate 128 (27008). Two bytes each,
  // plus one embedding row of 128 bf16 for the step's one token.
  const double dense = 151936.0 * 128 + 128 + 3 * 67624 + 65600 + 4 * 27008;
  EXPECT_DOUBLE_EQ(b1.weights, 2 * dense + 128 * 2);
  // One row routes to exactly top-4 experts of 3·64·128 bf16 each, in every one of the 4 layers.
  EXPECT_DOUBLE_EQ(b1.experts, 4.0 * 4 * 3 * 64 * 128 * 2);
  // Per linear-attention layer: fp32 recurrent state 4·32·32 and conv state 256·3, read and written.
  EXPECT_DOUBLE_EQ(b1.state, 3.0 * 2 * 4 * (4 * 32 * 32 + 256 * 3));
  // The full-attention layer's K and V: 72 tokens × 2 KV heads × 32, fp32.
  EXPECT_DOUBLE_EQ(b1.kv, 72.0 * 2 * 2 * 32 * 4);
  // The host bench's bucket-1 row in the README: 40.6 MB at 64 tokens + half of 16 decoded.
  EXPECT_NEAR(b1.total() / 1e6, 40.6, 0.05);
}

TEST(StepBytes, GrowsWithBucketAndContext) {
  const Plan p = tiny_plan();
  double last_bucket = 0;
  for (int b : {1, 2, 4, 8, 16, 32}) {
    const StepBytes s = step_bytes(p, b, 512);
    EXPECT_GT(s.total(), last_bucket) << "bucket " << b;
    last_bucket = s.total();
    double last_context = -1;
    for (double c : {0.0, 1.0, 64.0, 4096.0}) {
      const double t = step_bytes(p, b, c).total();
      EXPECT_GT(t, last_context) << "bucket " << b << " context " << c;
      last_context = t;
    }
  }
}

TEST(StepBytes, ExpertUnionIsBoundedByTheExperts) {
  EXPECT_DOUBLE_EQ(expected_expert_union(16, 4, 1), 4.0);
  EXPECT_DOUBLE_EQ(expected_expert_union(16, 16, 3), 16.0);
  // a3b at bucket 16 (docs/chemistry.md): about 102 of 256 experts per layer.
  EXPECT_NEAR(expected_expert_union(256, 8, 16), 102.0, 0.5);
  double last = 0;
  for (int rows = 1; rows <= 4096; rows *= 2) {
    const double u = expected_expert_union(256, 8, rows);
    EXPECT_GE(u, last);
    EXPECT_LE(u, 256.0);
    last = u;
  }
  EXPECT_NEAR(last, 256.0, 1e-6);
}

}  // namespace
}  // namespace rocket
