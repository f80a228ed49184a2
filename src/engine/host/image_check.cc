// `rocket-engine imagecheck`: prompts with images on the real engine (ctest e2e.images). On a plan
// that carries a vision tower:
//  1. Deterministic: a one-image prompt run twice, in two slots, gives the same logits bit for bit over
//     its last prompt row and greedy decode steps.
//  2. The image counts: the same tokens with another image, and with no image set (the image_pad
//     tokens' own embeddings), give other logits.
//  3. Batched: a two-image prompt and a one-image prompt decoded together give each the logits it has
//     decoding alone, bit for bit.
//  4. The rope delta: a prompt whose last text token is decoded instead of prefilled gives the logits
//     of prefilling it (within FP32 rounding: prefill and decode order their sums differently): the
//     decoded row's rotary position is its index + the delta (-3 here, worked by hand), not its index.
//  5. Refusals: images that do not match the prompt's image tokens are refused, the slot left text.
//  6. With --golden: the HF reference's first-token logits of prompts with images
//     (tools/reference/prompt_image_golden.py), their positions and rope delta, and one decode step after
//     them; skipped, saying so, until that file is committed.
//  7. Resumed from the prefix cache (docs/images.md, "In the scheduler"): a prompt whose first page's
//     KV and state another slot computed, restored at a page boundary inside its image or past its
//     first image, gives the logits of computing it whole, bit for bit: past an image with that
//     image's patches replaced (set_images encodes no image wholly before the resume point, and no row
//     reads one), inside one with the rows after the boundary read from the tower (another image
//     there gives other logits).
// On a plan without a tower: image input is refused, naming the reason.
// Exit 0 when all hold; prints one line per check.
#include "engine/host/image_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kernels/host/sample.h"
#include "vision/golden_patches.h"
#include "vision/mrope_positions.h"

namespace rocket {

namespace {

using Logits = std::vector<float>;
using vision::ImageGrid;
using vision::PromptImages;

int report(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  return ok ? 0 : 1;
}

bool same(const Logits& a, const Logits& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Largest |a - b| over the largest |b|.
double relative_gap(const Logits& a, const Logits& b) {
  double gap = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    gap = std::max(gap, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return gap / std::max(scale, 1e-30);
}

// Deterministic patch values in [-1, 1), distinct per `which`.
PromptImages images(uint32_t which, std::vector<ImageGrid> grids, int patch_dim) {
  PromptImages im;
  im.grids = std::move(grids);
  int64_t patches = 0;
  for (const ImageGrid& g : im.grids) patches += g.patches();
  std::mt19937 rng(which);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  im.patches.resize(size_t(patches * patch_dim));
  for (float& v : im.patches) v = d(rng);
  return im;
}

class Runner {
 public:
  explicit Runner(HostEngine& e) : e_(e) {}

  // A fresh sequence in `slot` with `prompt` and its images, prefilled; returns the last row's logits.
  Logits start(int slot, const std::vector<int32_t>& prompt, const PromptImages& im) {
    e_.reset_slot(slot);
    e_.set_images(slot, prompt, im);
    const int chunk = int(engine::kPrefillChunk);
    for (int at = 0; at < int(prompt.size()); at += chunk) {
      const int n = std::min<int>(chunk, int(prompt.size()) - at);
      const bool last = at + n == int(prompt.size());
      e_.prefill(slot, prompt.data() + at, n, at, last ? n - 1 : n);
      if (last) return Logits(e_.logits(n - 1), e_.logits(n - 1) + engine::kVocab);
    }
    fail("imagecheck: empty prompt");
  }

  // One decode step of the streams in `slots` at KV positions `pos` with tokens `ids`.
  std::vector<Logits> decode(const std::vector<int>& slots, const std::vector<int32_t>& ids,
                             const std::vector<int64_t>& pos) {
    e_.decode(int(slots.size()), ids.data(), slots.data(), pos.data());
    std::vector<Logits> out;
    for (size_t i = 0; i < slots.size(); ++i) out.emplace_back(e_.logits(int(i)), e_.logits(int(i)) + engine::kVocab);
    return out;
  }

  // The prompt's last logits, then `steps` greedy decode steps' logits, decoding alone.
  std::vector<Logits> alone(int slot, const std::vector<int32_t>& prompt, const PromptImages& im, int steps) {
    std::vector<Logits> out{start(slot, prompt, im)};
    for (int s = 0; s < steps; ++s) {
      const int32_t next = host::argmax(out.back().data(), int(engine::kVocab));
      out.push_back(decode({slot}, {next}, {int64_t(prompt.size()) + s})[0]);
    }
    return out;
  }

 private:
  HostEngine& e_;
};

}  // namespace

namespace {

// max |got[at[i]] - want[i]| / max |want[i]|: the golden's sparse row (prompt_image_golden.py's
// sparse_row keeps the largest values, so the scale is the row's). Infinity when the row's length is
// not the golden's vocabulary or an index falls outside it.
double sparse_gap(const Logits& got, const nlohmann::json& at_json, const nlohmann::json& want_json, int64_t vocab) {
  const std::vector<int64_t> at = at_json.get<std::vector<int64_t>>();
  const std::vector<float> want = want_json.get<std::vector<float>>();
  if (int64_t(got.size()) != vocab || at.size() != want.size()) return INFINITY;
  double gap = 0, scale = 0;
  for (size_t i = 0; i < at.size(); ++i) {
    if (at[i] < 0 || at[i] >= vocab) return INFINITY;
    gap = std::max(gap, double(std::fabs(got[size_t(at[i])] - want[i])));
    scale = std::max(scale, double(std::fabs(want[i])));
  }
  return gap / std::max(scale, 1e-30);
}

// 6. The reference's logits (prompt_image_golden.py) within `tolerance` of the largest reference value,
// at the indices the golden keeps.
int compare_golden(HostEngine& e, Runner& run, const std::string& path, double tolerance) {
  if (!std::filesystem::exists(path)) {
    std::printf("skip %s is not committed yet: it is made on the GPU machine by tools/reference/prompt_image_golden.py "
                "(docs/vision-tower.md)\n", path.c_str());
    return 0;
  }
  std::ifstream in(path);
  const nlohmann::json g = nlohmann::json::parse(in);
  const PlanVision& v = *e.plan().vision;
  int failures = 0;
  for (const auto& c : g.at("cases")) {
    const std::string name = c.at("name");
    const std::vector<int32_t> prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
    PromptImages im;
    int64_t patches = 0;
    for (const auto& grid : c.at("grids")) {
      im.grids.push_back({grid.at(0).get<int>(), grid.at(1).get<int>(), grid.at(2).get<int>()});
      patches += im.grids.back().patches();
    }
    im.patches = vision::golden_patch_values(c.at("patch_seed").get<uint32_t>(), patches * v.tower.patch_dim());
    const Logits got = run.start(0, prompt, im);
    const int64_t vocab = c.at("vocab");
    const double gap = sparse_gap(got, c.at("logits_at"), c.at("logits"), vocab);
    failures += report(gap <= tolerance, fmt::format("{}: first-token logits within {:.3g} of the reference's (gap "
                                                     "{:.3g})", name, tolerance, gap));
    const vision::MropePositions m = vision::mrope_positions(prompt, v.image_token, im.grids, v.tower.merge);
    bool same_positions = c.at("positions").size() == 3;
    for (size_t i = 0; same_positions && i < prompt.size(); ++i)
      same_positions = c["positions"][0][i] == m.positions[i].t && c["positions"][1][i] == m.positions[i].h &&
                       c["positions"][2][i] == m.positions[i].w;
    failures += report(same_positions && e.rope_delta(0) == c.at("rope_delta").get<int64_t>(),
                       fmt::format("{}: positions and rope delta {} are the reference's ({})", name, e.rope_delta(0),
                                   c.at("rope_delta").get<int64_t>()));
    const int32_t greedy = c.at("greedy");
    const Logits step = run.decode({0}, {greedy}, {int64_t(prompt.size())})[0];
    const double step_gap = sparse_gap(step, c.at("decode_logits_at"), c.at("decode_logits"), vocab);
    failures += report(step_gap <= tolerance, fmt::format("{}: the decode step after it within {:.3g} (gap {:.3g})",
                                                          name, tolerance, step_gap));
  }
  return failures;
}

}  // namespace

int cmd_image_check(HostEngine& e, const std::string& golden, double tolerance) {
  const Plan& plan = e.plan();
  if (!plan.vision) {
    // A text plan: image input is refused, saying why.
    PromptImages im = images(1, {{1, 2, 2}}, 1536);
    std::string said;
    try {
      e.set_images(0, std::vector<int32_t>{1, 2}, im);
    } catch (const Error& err) {
      said = err.what();
    }
    return report(said.find("carries no vision tower") != std::string::npos,
                  "a plan without a vision tower refuses image input: " + said);
  }
  const PlanVision& v = *plan.vision;
  const int patch_dim = v.tower.patch_dim();
  const int32_t pad = v.image_token, vs = v.vision_start_token, ve = v.vision_end_token;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> text(0, 151642);  // ordinary tokens, below Qwen's specials
  auto words = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = text(rng);
    return t;
  };
  auto cat = [](std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  auto pads = [&](int n) { return std::vector<int32_t>(size_t(n), pad); };
  Runner run(e);
  int failures = 0;
  constexpr int kSteps = 6;

  // One image [1, 4, 6] (6 tokens) between 3 and 2 text tokens: 13 tokens; delta -3 (vision-tower.md).
  const std::vector<int32_t> one = cat({words(3), {vs}, pads(6), {ve}, words(2)});
  const PromptImages im1 = images(11, {{1, 4, 6}}, patch_dim), im1b = images(12, {{1, 4, 6}}, patch_dim);

  // 1. Deterministic.
  const std::vector<Logits> a = run.alone(0, one, im1, kSteps);
  const std::vector<Logits> a2 = run.alone(2, one, im1, kSteps);
  bool det = true;
  for (size_t i = 0; i < a.size(); ++i) det = det && same(a[i], a2[i]);
  failures += report(det, "a one-image prompt gives the same logits twice, in two slots (prompt + 6 greedy steps)");

  // 2. The image counts.
  const Logits other = run.start(1, one, im1b);
  const Logits none = run.start(1, one, PromptImages{});
  failures += report(relative_gap(other, a[0]) > 1e-3, fmt::format("another image gives other logits (gap {:.3g} of "
                                                                    "the largest)", relative_gap(other, a[0])));
  failures += report(relative_gap(none, a[0]) > 1e-3,
                     fmt::format("the image_pad tokens' own embeddings give other logits (gap {:.3g})",
                                 relative_gap(none, a[0])));

  // 3. Batched: a two-image prompt ([1, 2, 2]: 1 token; [1, 4, 4]: 4 tokens) beside the one-image one.
  const std::vector<int32_t> two = cat({words(2), {vs}, pads(1), {ve}, words(4), {vs}, pads(4), {ve}, words(3)});
  const PromptImages im2 = images(21, {{1, 2, 2}, {1, 4, 4}}, patch_dim);
  const std::vector<Logits> b = run.alone(1, two, im2, kSteps);
  const std::vector<Logits> a_again = run.alone(0, one, im1, 0);  // slot 0 back at a's prompt
  const Logits b0 = run.start(1, two, im2);
  bool batched = same(b0, b[0]) && same(a_again[0], a[0]);
  int32_t next_a = host::argmax(a[0].data(), int(engine::kVocab)), next_b = host::argmax(b[0].data(), int(engine::kVocab));
  for (int s = 0; s < kSteps; ++s) {
    const std::vector<Logits> rows =
        run.decode({0, 1}, {next_a, next_b}, {int64_t(one.size()) + s, int64_t(two.size()) + s});
    batched = batched && same(rows[0], a[size_t(s) + 1]) && same(rows[1], b[size_t(s) + 1]);
    next_a = host::argmax(rows[0].data(), int(engine::kVocab));
    next_b = host::argmax(rows[1].data(), int(engine::kVocab));
  }
  failures += report(batched, "a two-image and a one-image prompt decoded together give each its logits alone");
  const int64_t want_two = vision::mrope_positions(two, pad, im2.grids, v.tower.merge).delta;
  failures += report(e.rope_delta(0) == -3 && e.rope_delta(1) == want_two,
                     fmt::format("rope deltas {} (by hand: -3) and {} (mrope_positions: {})", e.rope_delta(0),
                                 e.rope_delta(1), want_two));

  // 4. The rope delta carries decoded tokens: decode one's last token instead of prefilling it.
  const std::vector<int32_t> head(one.begin(), one.end() - 1);
  run.start(3, head, im1);
  const Logits decoded = run.decode({3}, {one.back()}, {int64_t(head.size())})[0];
  const double gap = relative_gap(decoded, a[0]);
  failures += report(gap < 1e-4 && e.rope_delta(3) == -3,
                     fmt::format("the last token decoded at index + delta gives its prefilled logits (gap {:.3g} of "
                                 "the largest; delta {})", gap, e.rope_delta(3)));

  // 5. Refusals.
  std::string said;
  try {
    e.set_images(2, one, images(13, {{1, 4, 4}}, patch_dim));  // 4 tokens where the prompt has 6
  } catch (const Error& err) {
    said = err.what();
  }
  failures += report(!said.empty() && e.rope_delta(2) == 0, "images that do not match the prompt are refused: " + said);

  // 7. Resumed from the cache at the first page boundary P: slot 0 computes the prompt in chunks and
  // captures its state at P (snapshot 0); slot 1 restores it, reads slot 0's first page, is given
  // `warm` images with P tokens computed and computes the rest. Both return the last row's logits.
  const int P = int(engine::kKvPageTokens), chunk = int(engine::kPrefillChunk);
  auto resumed = [&](const std::vector<int32_t>& prompt, const PromptImages& cold, const PromptImages& warm) {
    auto prefill = [&](int slot, int from) {
      int n = 0;
      for (int at = from; at < int(prompt.size()); at += n) {
        n = std::min(chunk, (at < P ? P : int(prompt.size())) - at);
        e.prefill(slot, prompt.data() + at, n, at, n - 1);
        if (at + n == P && from == 0) e.capture_state(slot, 0);
      }
      return Logits(e.logits(n - 1), e.logits(n - 1) + engine::kVocab);
    };
    e.reset_slot(0);
    e.set_images(0, prompt, cold);
    const Logits want = prefill(0, 0);
    std::vector<int> pages(size_t(HostEngine::kPagesPerStream));
    for (int j = 0; j < HostEngine::kPagesPerStream; ++j) pages[size_t(j)] = (j == 0 ? 0 : HostEngine::kPagesPerStream) + j;
    e.restore_state(0, 1);
    e.bind_pages(1, pages.data(), int(pages.size()));
    e.set_images(1, prompt, warm, P);
    const Logits got = prefill(1, P);
    pages[0] = HostEngine::kPagesPerStream;  // slot 1 back on its own pages
    e.bind_pages(1, pages.data(), int(pages.size()));
    return std::pair(want, got);
  };
  if (P < 80 || P + 64 > int(engine::kMaxContext)) {
    std::printf("skip resuming from the cache: pages of %d tokens in a context of %lld leave no room for the "
                "prompts\n", P, (long long)engine::kMaxContext);
    if (!golden.empty()) failures += compare_golden(e, run, golden, tolerance);
    return failures ? 1 : 0;
  }
  // Inside: 15 of a 32-token image ([1, 8, 16]) before P.
  const int before_image = P - 16;
  const std::vector<int32_t> inside = cat({words(before_image), {vs}, pads(32), {ve}, words(30)});
  const PromptImages im7 = images(71, {{1, 8, 16}}, patch_dim), im7b = images(72, {{1, 8, 16}}, patch_dim);
  const auto [cold_in, warm_in] = resumed(inside, im7, im7);
  failures += report(same(cold_in, warm_in), fmt::format("a prompt resumed at a page boundary {} tokens into its "
                                                         "image gives the logits of computing it whole", P - before_image - 1));
  const Logits other_in = resumed(inside, im7, im7b).second;
  failures += report(relative_gap(other_in, cold_in) > 1e-3,
                     fmt::format("resumed inside an image, its rows after the boundary are the image's: another "
                                 "image's give other logits (gap {:.3g})", relative_gap(other_in, cold_in)));
  // Past: a 32-token image wholly before P, an 8-token one ([1, 4, 8]) after it; resumed with the
  // first image's patches replaced by another image's, which no row reads.
  const std::vector<int32_t> past =
      cat({words(P - 80), {vs}, pads(32), {ve}, words(60), {vs}, pads(8), {ve}, words(5)});
  const PromptImages im7c = images(73, {{1, 8, 16}, {1, 4, 8}}, patch_dim);
  PromptImages im7c_warm = im7c;
  std::copy_n(im7b.patches.begin(), im7b.patches.size(), im7c_warm.patches.begin());
  const auto [cold_past, warm_past] = resumed(past, im7c, im7c_warm);
  failures += report(same(cold_past, warm_past) && e.rope_delta(1) == e.rope_delta(0),
                     "a prompt resumed past its first image gives the logits of computing it whole with that image's "
                     "patches replaced (no row reads them), the second image's rows read");
  if (!golden.empty()) failures += compare_golden(e, run, golden, tolerance);
  return failures ? 1 : 0;
}

}  // namespace rocket
