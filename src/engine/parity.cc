#include "engine/parity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "core/cli.h"
#include "core/error.h"
#include "kernels/host/sample.h"

namespace rocket {

std::string ParityResult::summary() const {
  return fmt::format("parity {}: {} logit rows compared, worst relative difference {:.3g} (tolerance {:.3g}); "
                     "{} free-running greedy steps, {} skipped for a reference margin within tolerance (at most {})",
                     ok ? "PASS" : "FAIL", compared, worst_rel, tolerance, free_steps, skipped, max_skipped(free_steps));
}

ParityResult run_parity(BatchEngine& e, const PrefillRows& prefill_rows, const Golden& g, float tol) {
  const int V = e.vocab();
  const int chunk = e.plan().prefill_chunk;
  const int P = int(g.prompts.size());
  if (P > e.plan().max_streams) fail("parity: {} prompts exceed the engine's {} streams", P, e.plan().max_streams);
  ParityResult r{.tolerance = tol};
  auto check = [&](const char* what, int p, size_t i, const LogitDiff& d) {
    r.worst_rel = std::max(r.worst_rel, d.rel);
    ++r.compared;
    if (!(d.rel <= tol)) {
      if (r.ok)
        std::fprintf(stderr, "FAIL %s prompt %d position %zu: |diff| %.3g (rel %.3g > %.3g) at id %d: ref %.6f got %.6f\n",
                     what, p, i, d.max_abs, d.rel, tol, d.worst_id, d.ref, d.got);
      r.ok = false;
    }
  };

  // 1) Teacher-forced prefill over prompt + reference greedy tokens, logits at every position.
  for (int p = 0; p < P; ++p) {
    const GoldenPrompt& gp = g.prompts[p];
    std::vector<int32_t> seq = gp.prompt_ids;
    seq.insert(seq.end(), gp.greedy_ids.begin(), gp.greedy_ids.end());
    seq.pop_back();  // the last greedy token has no position to predict from
    e.reset_state(p);
    for (size_t at = 0; at < seq.size(); at += chunk) {
      const int n = int(std::min<size_t>(chunk, seq.size() - at));
      const float* rows = prefill_rows(p, seq.data() + at, n, int64_t(at));
      for (int row = 0; row < n; ++row) {
        const float* l = rows + int64_t(row) * V;
        check("prefill", p, at + row, compare_logits(gp.positions[at + row], g.sample_stride, l, V));
        if (at + row + 1 == gp.prompt_ids.size() && !gp.full_last_prompt.empty())
          check("prefill-full", p, at + row, compare_full(gp.full_last_prompt, l, V));
      }
    }
  }

  // 2) Free-running greedy, every prompt a stream of one bucket.
  std::vector<int64_t> pos(P);
  std::vector<int32_t> next(P);
  std::vector<int> slots(P);
  std::vector<SamplingKnobs> greedy(P, SamplingKnobs{.temperature = 0.0f});
  for (int p = 0; p < P; ++p) {
    slots[p] = p;
    e.reset_state(p);
    const std::vector<int32_t>& ids = g.prompts[p].prompt_ids;
    for (size_t at = 0; at < ids.size(); at += chunk) {
      const int n = int(std::min<size_t>(chunk, ids.size() - at));
      const bool last = at + n == ids.size();
      e.prefill(p, ids.data() + at, n, int64_t(at), last ? &greedy[size_t(p)] : nullptr, last);
    }
    next[p] = e.tokens()[0];  // the first token, picked in the engine as serving picks it
    if (next[p] != host::argmax(e.logits(0), V)) ++r.sampler_mismatches;
    pos[p] = int64_t(ids.size());
  }
  const size_t steps = g.prompts[0].greedy_ids.size();
  for (size_t s = 0; s < steps; ++s) {
    for (int p = 0; p < P; ++p) {
      const GoldenPrompt& gp = g.prompts[p];
      if (s >= gp.greedy_ids.size()) continue;
      const GoldenPosition& ref = gp.positions[gp.prompt_ids.size() - 1 + s];
      ++r.free_steps;
      if (next[p] != gp.greedy_ids[s]) {
        const float scale = std::max(1.0f, std::fabs(ref.top_logits[0]));
        if (ref.margin <= 2 * tol * scale) {
          ++r.skipped;
        } else {
          if (r.ok)
            std::fprintf(stderr, "FAIL greedy prompt %d step %zu: got %d, reference %d (reference margin %.4f)\n", p, s,
                         next[p], gp.greedy_ids[s], ref.margin);
          r.ok = false;
        }
        next[p] = gp.greedy_ids[s];
      }
    }
    if (s + 1 == steps) break;
    e.decode(P, next.data(), slots.data(), pos.data(), greedy.data(), /*want_logits=*/true);
    const int32_t* picked = e.tokens();
    for (int p = 0; p < P; ++p) {
      const GoldenPrompt& gp = g.prompts[p];
      if (s + 1 < gp.greedy_ids.size())
        check("decode", p, gp.prompt_ids.size() + s,
              compare_logits(gp.positions[gp.prompt_ids.size() + s], g.sample_stride, e.logits(p), V));
      if (picked[p] != host::argmax(e.logits(p), V)) ++r.sampler_mismatches;
      next[p] = picked[p];
      ++pos[p];
    }
  }
  // A skip forgives a mismatch the tolerance band explains, but a band wide enough to hold most steps
  // (the H200's 7.8e-2 is ~6 logits at the a3b's scale) would forgive an engine that picks wrong
  // wholesale: the count is bounded too.
  if (r.skipped > max_skipped(r.free_steps)) {
    std::fprintf(stderr, "FAIL %d of %d free-running greedy steps differ from the reference within its margin band; "
                         "at most %d may\n", r.skipped, r.free_steps, max_skipped(r.free_steps));
    r.ok = false;
  }
  if (r.sampler_mismatches) {
    std::fprintf(stderr, "FAIL the engine's greedy pick differs from the host argmax of the same logits %d times\n",
                 r.sampler_mismatches);
    r.ok = false;
  }
  return r;
}

std::optional<int> parse_parity_command(const std::vector<std::string>& args, float& tolerance,
                                        const std::string& tolerance_help, Golden& golden) {
  std::string golden_path, full;
  CLI::App cli("Teacher-forced logits and free-running greedy tokens against the HF reference's goldens.",
               "rocket-engine parity");
  cli.add_option("--golden", golden_path, "golden vectors (tests/golden/*.json)")->required()->check(CLI::ExistingFile);
  cli.add_option("--full", full, "full logits at each prompt's last position (tests/golden/*_last.bin)")
      ->check(CLI::ExistingFile);
  cli.add_option("--tolerance", tolerance, tolerance_help)->check(at_least(0))->capture_default_str();
  if (const auto rc = parse_command(cli, args)) return rc;
  golden = load_golden(golden_path, full);
  return std::nullopt;
}

}  // namespace rocket
