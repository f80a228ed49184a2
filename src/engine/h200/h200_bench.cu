// How the benchmark measures (rocket-engine bench):
//   context   every slot's KV pages and conv + recurrent state are filled with random values by a
//             kernel, and each stream decodes from position `context`: the kernels read exactly the
//             bytes they would after a real prefill of that many tokens (prefilling 32 streams × 8192
//             tokens would take longer than the benchmark itself).
//   ms/step   wall time of the serving loop: stage inputs, one graph launch, read back the sampled
//             tokens (which become the next step's inputs, distinct per stream), over `steps` steps,
//             timed `reps` times one after another: the median, and the fastest and slowest run
//             (min-max), since run to run a step moves by more than the fractions a target is set in.
//   split     each kind of kernel (StepKind) captured alone in a graph of the bucket and timed with
//             events over `steps` launches; "gaps" = the full graph's time − the kinds' sum (launch
//             gaps and tails between kernels), "host" = wall step − full graph (staging and readback).
//   bytes     plan/step_bytes.h, at the mean position of the timed steps
//   extras    --presence-penalty etc. give each stream a sampling history (a 256-token prompt marked,
//             --logit-bias N random biases) that the sampler reads and counts into; --masked gives
//             every row a grammar mask each step (half the vocabulary at random, always allowing the
//             token the row sampled last, written by the loop thread into the mapped mask rows before
//             the launch, as the scheduler does): its cost over the same run without is the mask's.
//   roofline  bytes/step over the device copy bandwidth (read + write, the best of 10 1 GiB cudaMemcpys) inside
//             the arena, measured in the same run before the fill.
#include "engine/h200/h200_bench.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/primitives/cuda_check.h"
#include "kernels/cuda/primitives/cuda_handles.h"
#include "engine/h200/forward_shapes.h"
#include "plan/step_bytes.h"

namespace rocket {

using namespace engine;

namespace {

__device__ __forceinline__ float hash_uniform(uint64_t i, uint32_t seed) {  // [-1, 1)
  uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return float(int64_t(z ^ (z >> 31)) >> 40) * (1.0f / float(1 << 23));
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, uint64_t n, float scale, uint32_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16_rn(scale * hash_uniform(i, seed));
}

__global__ void fill_f32_kernel(float* p, uint64_t n, float scale, uint32_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    p[i] = scale * hash_uniform(i, seed);
}

// Milliseconds per launch of `g`, over n launches after one warm-up.
double time_graph(cudaGraphExec_t g, cudaStream_t s, int n) {
  CUDA_CHECK(cudaGraphLaunch(g, s));
  return double(elapsed_ms(s, [&] {
           for (int i = 0; i < n; ++i) CUDA_CHECK(cudaGraphLaunch(g, s));
         })) /
         n;
}

// Device copy bandwidth (read + write) in GB/s: cudaMemcpy between two halves of the KV region.
double arena_copy_gbps(const H200Engine& e) {
  const uint64_t bytes = std::min<uint64_t>(1ull << 30, kBufBytes_kv_cache / 2) & ~uint64_t(0xffff);
  uint8_t* src = e.arena().at<uint8_t>(kBuf_kv_cache);
  return rocket::copy_gbps(src + bytes, src, bytes, e.stream(), 10);
}

void fill_context(const H200Engine& e) {
  cudaStream_t s = e.stream();
  const Arena& a = e.arena();
  fill_bf16_kernel<<<4096, 256, 0, s>>>(a.at<__nv_bfloat16>(kBuf_kv_cache), kBufBytes_kv_cache / 2, 1.0f, 1);
  CUDA_CHECK_LAUNCH();
  // Small recurrent state, as a trained model's decayed state is; conv history like activations.
  fill_f32_kernel<<<4096, 256, 0, s>>>(a.at<float>(kBuf_gdn_state), kBufBytes_gdn_state / 4, 0.02f, 2);
  CUDA_CHECK_LAUNCH();
  fill_f32_kernel<<<4096, 256, 0, s>>>(a.at<float>(kBuf_conv_state), kBufBytes_conv_state / 4, 1.0f, 3);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaStreamSynchronize(s));
}

struct Kind {
  const char* name;
  uint32_t mask;
};
constexpr Kind kKinds[] = {{"GDN", kKindGdn},   {"attention", kKindAttention}, {"MoE", kKindMoe},        {"dense", kKindDense},
                           {"LM head", kKindLmHead}, {"sampling", kKindSampling}, {"norm+embed", kKindNorm}};

}  // namespace

int run_bench(H200Engine& e, int context, int steps, int reps, const SamplingKnobs& knobs, const BenchRows& extras) {
  if (context < 1 || steps < 1 || reps < 1 || context + reps * steps + 2 > kMaxContext)
    throw Error("bench: context " + std::to_string(context) + " + " + std::to_string(reps) + " x " + std::to_string(steps) +
                " steps exceed the plan's context " + std::to_string(kMaxContext) + " (build with a larger --max-context)");
  if (!(knobs.temperature >= 0.0f) || !(knobs.top_p > 0.0f && knobs.top_p <= 1.0f) || knobs.top_k < 0)
    throw Error("bench: sampling needs --temperature >= 0, --top-p in (0, 1] and --top-k >= 0");
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double bw = arena_copy_gbps(e);
  fill_context(e);
  std::printf("\n%s, device copy bandwidth (read + write, 1 GiB cudaMemcpy): %.0f GB/s; weights loaded at %.2f GB/s\n", prop.name,
              bw, e.load_report().gbps());
  if (extras.logit_bias < 0 || extras.logit_bias > kMaxLogitBias)
    throw Error("bench: --logit-bias takes 0.." + std::to_string(kMaxLogitBias) + " entries");
  SamplingKnobs row_knobs = knobs;
  row_knobs.logit_bias = extras.logit_bias;
  row_knobs.history = 0;  // set per stream below when the rows adjust
  const bool adjusts = row_knobs.adjusts();
  char sampling[256] = "greedy";
  int at = knobs.temperature > 0.0f ? std::snprintf(sampling, sizeof sampling, "sampled at temperature %g, top-p %g, top-k %d",
                                                    knobs.temperature, knobs.top_p, knobs.top_k)
                                    : int(std::strlen(sampling));
  if (adjusts)
    at += std::snprintf(sampling + at, sizeof sampling - at, ", presence %g frequency %g repetition %g, %d biases",
                        knobs.presence_penalty, knobs.frequency_penalty, knobs.repetition_penalty, extras.logit_bias);
  if (extras.masked) std::snprintf(sampling + at, sizeof sampling - at, ", every row grammar-masked");
  std::mt19937 rng(7);
  constexpr int kWords = cuda::mask_words(int(kVocab));
  std::vector<uint32_t> masks(size_t(h200::kMaxBucket) * kWords);
  for (uint32_t& w : masks) w = uint32_t(rng());
  std::vector<const uint32_t*> mask_rows(h200::kMaxBucket);
  for (int s = 0; s < h200::kMaxBucket; ++s) mask_rows[size_t(s)] = masks.data() + size_t(s) * kWords;
  std::printf("context %d tokens, %d x %d decode steps per bucket (ms/step: the median run), distinct tokens per stream, %s; "
              "split: ms per step of each kind\n\n",
              context, reps, steps, sampling);
  std::printf("| bucket | ms/step | min-max | graph | GDN | attention | MoE | dense | LM head | sampling | norm+embed | gaps | host "
              "| MB/step | GB/s | roofline | tok/s aggregate | tok/s per stream |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
              "| ---: |\n");
  for (int b : kBuckets) {
    if (!extras.buckets.empty() && std::find(extras.buckets.begin(), extras.buckets.end(), b) == extras.buckets.end()) continue;
    std::vector<int> slots(b);
    std::vector<int64_t> pos(b, context);
    std::vector<int32_t> ids(b);
    std::vector<SamplingKnobs> rows(b, row_knobs);
    for (int s = 0; s < b; ++s) {
      slots[s] = s, ids[s] = int32_t((1000 + 7919 * s) % kVocab), rows[s].seed = uint64_t(s + 1);
      rows[s].history = adjusts ? s : -1;
      if (!adjusts) continue;
      std::vector<int32_t> prompt(256);
      for (int32_t& t : prompt) t = int32_t(rng() % uint32_t(kVocab));
      std::vector<LogitBias> bias;
      for (int i = 0; i < extras.logit_bias; ++i) bias.push_back({.token = int32_t((s * 7919 + i * 104729) % kVocab), .bias = 5.0f});
      e.reset_history(s, prompt, bias);
    }
    const bool pass_knobs = knobs.temperature > 0.0f || adjusts;
    auto step = [&] {
      for (int s = 0; s < b; ++s) rows[s].counter = uint64_t(pos[s]);
      if (extras.masked) {
        for (int s = 0; s < b; ++s) masks[size_t(s) * kWords + ids[s] / 32] |= 1u << (ids[s] % 32);
        e.mask_next_picks(std::span<const uint32_t* const>(mask_rows.data(), size_t(b)));
      }
      e.decode(b, ids.data(), slots.data(), pos.data(), pass_knobs ? rows.data() : nullptr);
      const int32_t* t = e.tokens();
      for (int s = 0; s < b; ++s) ids[s] = t[s], ++pos[s];
    };
    step();
    step();
    std::vector<double> runs(reps);
    for (double& run : runs) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) step();
      run = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
    }
    std::sort(runs.begin(), runs.end());
    const double wall = runs[reps / 2];
    // Graph-only timings replay the last staged inputs (same positions): the kernels read the same
    // number of bytes as the timed steps.
    const double graph_ms = time_graph(e.graph(b, kKindAll), e.stream(), steps);
    double kind_ms[std::size(kKinds)], sum = 0;
    for (size_t k = 0; k < std::size(kKinds); ++k) sum += kind_ms[k] = time_graph(e.graph(b, kKinds[k].mask), e.stream(), steps);
    const double bytes = step_bytes(e.plan(), b, context + 1 + reps * steps / 2.0).total();
    const double gbps = bytes / (wall * 1e-3) / 1e9;
    std::printf("| %d | %.3f | %.3f-%.3f | %.3f |", b, wall, runs.front(), runs.back(), graph_ms);
    for (double m : kind_ms) std::printf(" %.3f |", m);
    std::printf(" %.3f | %.3f | %.0f | %.0f | %.1f%% | %.0f | %.1f |\n", graph_ms - sum, wall - graph_ms, bytes / 1e6, gbps,
                100.0 * gbps / bw, b / (wall * 1e-3), 1.0 / (wall * 1e-3));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace rocket
