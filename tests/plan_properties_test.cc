// What a plan must be, checked from outside the planner: the doctrine's 64 KiB quantum, a memory map
// whose buffers never share a byte, and sizes that follow from the chemistry's shapes. Each expected
// size is written here from the shapes (not read from compiler/memory_map.cc), so a planner that
// drifted from them fails even where Plan::validate (which checks alignment and bounds, not sizes or
// buffer overlaps) passes. tests/fixtures/plans/tiny_host_bf16.json (boosters_test.cc) only detects
// change; these tests say whether a plan, the fixture included, is right.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "compiler/memory_map.h"
#include "core/dtype.h"
#include "fuel/forge.h"
#include "fuel/manifest.h"
#include "plan/plan.h"
#include "test_paths.h"

namespace rocket {
namespace {

constexpr uint64_t kQuantum = 64 * 1024;  // the doctrine's alignment for blob units, buffers and pages

Plan tiny_host(WeightFormat f) {
  return plan_memory(chemistry_from_config(forge_config("tiny", 0), f, "tiny/config.json"), PlanOptions{});
}

Plan a3b4_h200() {
  PlanOptions o;
  o.booster = "h200";
  return plan_memory(chemistry_from_config(forge_config("a3b", 4), WeightFormat::kNVFP4, "a3b/config.json"), o);
}

Plan fixture() {
  std::ifstream f(test::test_data() + "/fixtures/plans/tiny_host_bf16.json");
  return Plan::from_json(nlohmann::json::parse(f), "fixture");
}

struct Span {
  uint64_t begin, end;
  std::string name;
};

// Spans sorted by start: each must end at or before the next begins.
void expect_disjoint(std::vector<Span> spans, const std::string& what) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    EXPECT_LE(spans[i - 1].end, spans[i].begin) << what << ": " << spans[i - 1].name << " [" << spans[i - 1].begin << ", "
                                                << spans[i - 1].end << ") overlaps " << spans[i].name << " at "
                                                << spans[i].begin;
}

// The memory map: regions and buffers on the quantum, disjoint, each buffer inside its region, the
// weights region the blob, the arena the end of the last region rounded up to the quantum.
void expect_memory_map(const Plan& p, const std::string& what) {
  std::vector<Span> regions, buffers;
  uint64_t last = 0;
  for (const PlanRegion& r : p.regions) {
    EXPECT_EQ(r.offset % kQuantum, 0u) << what << ": region " << r.name;
    regions.push_back({r.offset, r.offset + r.bytes, r.name});
    last = std::max(last, r.offset + r.bytes);
  }
  expect_disjoint(regions, what + " regions");
  EXPECT_EQ(p.arena_bytes, (last + kQuantum - 1) / kQuantum * kQuantum) << what;
  EXPECT_EQ(p.blob_bytes % kQuantum, 0u) << what;
  ASSERT_FALSE(p.regions.empty());
  EXPECT_EQ(p.regions[0].name, "weights");
  EXPECT_EQ(p.regions[0].offset, 0u);
  EXPECT_EQ(p.regions[0].bytes, p.blob_bytes);
  for (const PlanBuffer& b : p.buffers) {
    EXPECT_EQ(b.offset % kQuantum, 0u) << what << ": buffer " << b.name;
    // The token path's dequantised copy is empty unless a projection is block FP8.
    if (b.name != "dequant") EXPECT_GT(b.bytes, 0u) << what << ": buffer " << b.name;
    const auto r = std::find_if(p.regions.begin(), p.regions.end(), [&](const PlanRegion& r) { return r.name == b.region; });
    ASSERT_NE(r, p.regions.end()) << what << ": buffer " << b.name << " in no region";
    EXPECT_NE(b.region, "weights") << what << ": buffer " << b.name;
    EXPECT_GE(b.offset, r->offset) << what << ": buffer " << b.name;
    EXPECT_LE(b.offset + b.bytes, r->offset + r->bytes) << what << ": buffer " << b.name;
    buffers.push_back({b.offset, b.offset + b.bytes, b.name});
  }
  expect_disjoint(buffers, what + " buffers");
}

// The blob: every tensor of the fuel's manifest once, inside [0, blob_bytes), none overlapping, each
// its shape times its element width (the H200's NVFP4 register code keeps the checkpoint's sizes);
// the first weight unit on the quantum, every part on 256 bytes.
void expect_blob(const Plan& p, const std::string& what) {
  EXPECT_EQ(p.tensors.size(), fuel_manifest(p.chemistry).size()) << what;
  std::vector<Span> spans;
  for (const PlanTensor& t : p.tensors) {
    EXPECT_EQ(t.offset % 256, 0u) << what << ": " << t.name;
    EXPECT_LE(t.offset + t.bytes, p.blob_bytes) << what << ": " << t.name;
    const uint64_t elems = std::accumulate(t.shape.begin(), t.shape.end(), uint64_t(1),
                                           [](uint64_t a, int64_t d) { return a * uint64_t(d); });
    EXPECT_EQ(t.bytes, elems * dtype_size(t.dtype)) << what << ": " << t.name;
    spans.push_back({t.offset, t.offset + t.bytes, t.name});
  }
  expect_disjoint(spans, what + " tensors");
  const auto embed = std::find_if(p.tensors.begin(), p.tensors.end(), [](const PlanTensor& t) { return t.name == "embed_tokens.weight"; });
  ASSERT_NE(embed, p.tensors.end()) << what;
  EXPECT_EQ(embed->offset % kQuantum, 0u) << what;
}

uint64_t buffer_bytes(const Plan& p, const std::string& name) { return p.buffer(name).bytes; }

// Sizes from the shapes: activation rows, logits, KV pages and recurrent state of every stream slot
// (the largest bucket's streams plus the padding slot a bucket's spare rows write to).
void expect_sizes(const Plan& p, const std::string& what) {
  const Chemistry& c = p.chemistry;
  const uint64_t rows = uint64_t(std::max(p.max_streams, p.prefill_chunk)), A = uint64_t(p.activation_bytes);
  const uint64_t slots = uint64_t(p.max_streams) + 1;
  int full = 0, linear = 0;
  for (LayerKind k : c.layer_types) (k == LayerKind::kFullAttention ? full : linear) += 1;
  EXPECT_EQ(p.max_rows, int(rows)) << what;
  EXPECT_EQ(buffer_bytes(p, "x"), rows * uint64_t(c.hidden) * A) << what;
  EXPECT_EQ(buffer_bytes(p, "route_idx"), rows * uint64_t(c.top_k) * 4) << what;
  EXPECT_EQ(buffer_bytes(p, "logits"), uint64_t(p.logit_rows) * uint64_t(c.vocab) * 4) << what;
  // A KV page is one layer's K (or V) for kv_page_tokens tokens, rounded up to the quantum; each slot
  // holds a whole context of them in every full-attention layer, for K and for V.
  const uint64_t token_bytes = uint64_t(c.kv_heads) * uint64_t(c.head_dim) * uint64_t(p.kv_bytes);
  EXPECT_EQ(p.kv_page_bytes % kQuantum, 0u) << what;
  EXPECT_LE(uint64_t(p.kv_page_tokens) * token_bytes, p.kv_page_bytes) << what;
  const uint64_t pages_per_layer = (uint64_t(p.max_context) + uint64_t(p.kv_page_tokens) - 1) / uint64_t(p.kv_page_tokens);
  EXPECT_EQ(uint64_t(p.kv_pages), slots * uint64_t(full) * pages_per_layer * 2) << what;
  EXPECT_EQ(buffer_bytes(p, "kv_cache"), uint64_t(p.kv_pages) * p.kv_page_bytes) << what;
  // FP32 recurrent state [v_heads, k_dim, v_dim] and the conv window (kernel - 1 columns of q|k|v) per
  // linear-attention layer and slot.
  EXPECT_EQ(buffer_bytes(p, "gdn_state"),
            slots * uint64_t(linear) * uint64_t(c.lin_v_heads) * uint64_t(c.lin_k_dim) * uint64_t(c.lin_v_dim) * 4)
      << what;
  const uint64_t conv_channels = 2 * uint64_t(c.lin_k_heads) * uint64_t(c.lin_k_dim) +
                                 uint64_t(c.lin_v_heads) * uint64_t(c.lin_v_dim);
  EXPECT_EQ(buffer_bytes(p, "conv_state"), slots * uint64_t(linear) * conv_channels * uint64_t(c.conv_kernel - 1) * 4)
      << what;
}

TEST(PlanProperties, TheCommittedFixtureIsARightPlan) {
  const Plan p = fixture();
  expect_memory_map(p, "fixture");
  expect_blob(p, "fixture");
  expect_sizes(p, "fixture");
}

TEST(PlanProperties, HostPlansOfEveryFormat) {
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFP8, WeightFormat::kNVFP4}) {
    const Plan p = tiny_host(f);
    const std::string what = "tiny host " + std::string(format_name(f));
    expect_memory_map(p, what);
    expect_blob(p, what);
    expect_sizes(p, what);
  }
}

TEST(PlanProperties, H200PlanOfTheA3bShape) {
  const Plan p = a3b4_h200();
  expect_memory_map(p, "a3b4 h200");
  expect_blob(p, "a3b4 h200");
  expect_sizes(p, "a3b4 h200");
}

TEST(PlanProperties, TheChecksCatchABrokenPlan) {
  // The checks above must be able to fail: two buffers made to overlap, a buffer off the quantum and a
  // state buffer one slot short each produce a failure.
  Plan p = tiny_host(WeightFormat::kBF16);
  Plan overlap = p;
  overlap.buffers[1].offset = overlap.buffers[0].offset;
  EXPECT_NONFATAL_FAILURE(expect_memory_map(overlap, "overlap"), "overlaps");
  Plan misaligned = p;
  misaligned.buffers[0].offset += 4096;
  EXPECT_NONFATAL_FAILURE(expect_memory_map(misaligned, "misaligned"), "buffer x");
  Plan short_state = p;
  for (PlanBuffer& b : short_state.buffers)
    if (b.name == "gdn_state") b.bytes -= b.bytes / uint64_t(p.max_streams + 1);
  EXPECT_NONFATAL_FAILURE(expect_sizes(short_state, "short"), "short");
}

}  // namespace
}  // namespace rocket
