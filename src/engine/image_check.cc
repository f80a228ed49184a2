// `rocket-engine imagecheck`: prompts with images on the real engine (ctest e2e.layouts runs the host
// engine's), over the scheduler's interface (BatchEngine) and inside its StepContract: prefill calls of
// at most the plan's prefill_chunk rows, greedy decode calls, each slot bound to at most its share of
// the cache pages.
//
// Two kinds of comparison, each line saying which it made:
//  - the same calls repeated (in the same slot or another) are bitwise on every engine;
//  - the same rows computed by different calls (a decode of 2 rows against decodes of 1, a decoded row
//    against a prefilled one, other prefill pieces) are bitwise on an exact engine (the host engine:
//    FP32, every row its own sums whatever the batch or piece) and within the tolerance of the largest
//    logit on one that is not (BF16 on the H200: another tiling rounds otherwise), --tolerance, the
//    golden's bound. Decode against prefill orders FP32 sums differently even on the host: 1e-4 there.
// A check that two inputs give other logits asks a gap above 1e-3 of the largest logit, and on an
// engine that is not exact above twice the tolerance if that is more: each computation may sit a
// tolerance from the exact rows, so only a gap past twice that shows the inputs changed them. The one
// exception is check 4's position, where the pair is one decode call shown to repeat bit for bit: 1e-3.
//
// On a plan that carries a vision tower:
//  1. Deterministic: a one-image prompt run twice, in two slots, gives the same logits bit for bit over
//     its last prompt row and greedy decode steps.
//  2. The image counts: the same tokens with another image, and with no image set (the image_pad
//     tokens' own embeddings), give other logits.
//  3. Batched: a two-image prompt and a one-image prompt decoded together (each fed its greedy tokens
//     decoding alone) give each the logits it has decoding alone; the rope deltas are the hand-worked
//     -3 and mrope_positions' for the two-image prompt.
//  4. The rope delta: a prompt whose last text token is decoded instead of prefilled gives the logits
//     of prefilling it: the decoded row's rotary position is its index + the delta (-3). The same
//     decode from the same state and KV repeats bit for bit in a slot restored and given the images
//     again (the whole head computed), and gives other logits in one restored without them (delta 0:
//     the row at its index), so the position is seen even where the tolerance is wider than its effect.
//  5. Refusals: images that do not match the prompt's image tokens are refused, the slot left text
//     (the images set before them forgotten).
//  6. With --golden: the HF reference's first-token logits of prompts with images
//     (tools/reference/prompt_image_golden.py), their positions and rope delta, and one decode step after
//     them, within the tolerance; skipped, saying so, where the file is missing.
//  7. Resumed from the prefix cache (docs/images.md, "In the scheduler"): a prompt whose first page's
//     KV and state another slot computed, restored at a page boundary inside its image or past its
//     first image, gives the logits of computing it whole: past an image with that image's patches
//     replaced (set_images encodes no image wholly before the resume point, and no row reads one),
//     inside one with the rows after the boundary read from the tower (another image there, resumed
//     the same way, gives other logits).
//  8. Keyed images (with the scheduler's digests) give the unkeyed logits bit for bit on every engine:
//     in one call, again from another slot, and split over two calls (the H200 engine's encoder cache).
// On a plan without a tower: image input is refused, naming the vision tower.
#include "engine/image_check.h"

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

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/cli.h"
#include "core/error.h"
#include "kernels/host/sample.h"
#include "vision/golden_patches.h"
#include "vision/mrope_positions.h"

namespace rocket {
// NOTE: a named namespace around the file-local one: src/engine/ compiles as one unity source, whose
// files' anonymous namespaces are one.
namespace image_check {
namespace {

using Logits = std::vector<float>;
using vision::ImageGrid;
using vision::PromptImages;

// Slots the checks use: 0..3 run prompts, 4 is check 4's control.
constexpr int kSlots = 5;
constexpr int kSteps = 6;  // greedy decode steps after a prompt
// Decode against prefill on an exact engine: FP32 sums in another order.
constexpr double kFp32OrderGap = 1e-4;
// The least gap of "other logits" (of the largest logit).
constexpr double kDistinctGap = 1e-3;

int report(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  return ok ? 0 : 1;
}

bool same(const Logits& a, const Logits& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Largest |a - b| over the largest |b|; NaN where the rows' lengths differ or either holds a value that
// is not finite, so that every comparison with it, "within" or "above", fails.
double relative_gap(const Logits& a, const Logits& b) {
  if (a.size() != b.size()) return NAN;
  double gap = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return NAN;
    gap = std::max(gap, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return gap / std::max(scale, 1e-30);
}

// Rows two computations must agree on: bit for bit, or each within `bound` of its reference's largest
// value. said() is what the report line shows of it.
class Agreement {
 public:
  Agreement(bool bitwise, double bound) : bitwise_(bitwise), bound_(bound) {}
  void add(const Logits& got, const Logits& want) {
    same_ = same_ && same(got, want);
    const double g = relative_gap(got, want);
    gap_ = std::isnan(g) || std::isnan(gap_) ? NAN : std::max(gap_, g);
  }
  bool ok() const { return bitwise_ ? same_ : gap_ <= bound_; }
  std::string said() const {
    if (bitwise_) return same_ ? "bit for bit" : fmt::format("NOT bit for bit: gap {:.3g}", gap_);
    return fmt::format("gap {:.3g} of the largest, tolerance {:.3g}", gap_, bound_);
  }

 private:
  bool bitwise_, same_ = true;
  double bound_, gap_ = 0;
};

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

// The calls every check makes, as the scheduler makes them.
class Runner {
 public:
  explicit Runner(BatchEngine& e)
      : e_(e), vocab_(e.vocab()), chunk_(e.plan().prefill_chunk),
        pages_((e.plan().max_context + e.plan().kv_page_tokens - 1) / e.plan().kv_page_tokens),
        greedy_(size_t(e.plan().max_streams), SamplingKnobs{.temperature = 0.0f}) {}

  // The cache pages slot `slot` owns: both engines give slot s the pages [s·P, (s+1)·P) of P =
  // ceil(max_context / page_tokens) (HostEngine::kPagesPerStream, H200Engine's), the most one slot binds.
  std::vector<int> own_pages(int slot) const {
    std::vector<int> p(static_cast<size_t>(pages_));
    for (int j = 0; j < pages_; ++j) p[size_t(j)] = slot * pages_ + j;
    return p;
  }

  // Rows [from, end) of `prompt` in the slot's sequence, in calls of at most the plan's prefill chunk;
  // where `boundary` lies after `from`, a call ends there, and with `capture` the state there goes
  // into snapshot 0. Returns the last row's logits.
  Logits prefill(int slot, const std::vector<int32_t>& prompt, int from, int boundary = 0, bool capture = false) {
    const int end = int(prompt.size());
    if (from >= end) fail("imagecheck: no prompt rows to prefill");
    int n = 0;
    for (int at = from; at < end; at += n) {
      n = std::min(chunk_, (at < boundary ? boundary : end) - at);
      e_.prefill(slot, prompt.data() + at, n, at, nullptr, /*want_logits=*/at + n == end);
      if (capture && at + n == boundary) e_.capture_state(slot, 0);
    }
    return Logits(e_.logits(0), e_.logits(0) + vocab_);
  }

  // A fresh sequence in `slot` with `prompt` and its images, prefilled; returns the last row's logits.
  Logits start(int slot, const std::vector<int32_t>& prompt, const PromptImages& im) {
    e_.reset_state(slot);
    e_.set_images(slot, prompt, im, 0);
    return prefill(slot, prompt, 0);
  }

  // One greedy decode step of the streams in `slots` at KV positions `pos` with tokens `ids`.
  std::vector<Logits> decode(const std::vector<int>& slots, const std::vector<int32_t>& ids,
                             const std::vector<int64_t>& pos) {
    e_.decode(int(slots.size()), ids.data(), slots.data(), pos.data(), greedy_.data(), /*want_logits=*/true);
    std::vector<Logits> out;
    for (size_t i = 0; i < slots.size(); ++i) out.emplace_back(e_.logits(int(i)), e_.logits(int(i)) + vocab_);
    return out;
  }

  int32_t greedy(const Logits& l) const { return host::argmax(l.data(), vocab_); }

  // The prompt's last logits, then `steps` greedy decode steps' logits, decoding alone.
  std::vector<Logits> alone(int slot, const std::vector<int32_t>& prompt, const PromptImages& im, int steps) {
    std::vector<Logits> out{start(slot, prompt, im)};
    for (int s = 0; s < steps; ++s) out.push_back(decode({slot}, {greedy(out.back())}, {int64_t(prompt.size()) + s})[0]);
    return out;
  }

 private:
  BatchEngine& e_;
  const int vocab_, chunk_, pages_;
  std::vector<SamplingKnobs> greedy_;  // a greedy row's knobs, for every row of a decode call
};

// max |got[at[i]] - want[i]| / max |want[i]|: the golden's sparse row (prompt_image_golden.py's
// sparse_row keeps the largest values, so the scale is the row's). NaN when the row's length is not
// the golden's vocabulary, an index falls outside it or a value is not finite.
double sparse_gap(const Logits& got, const nlohmann::json& at_json, const nlohmann::json& want_json, int64_t vocab) {
  const std::vector<int64_t> at = at_json.get<std::vector<int64_t>>();
  const std::vector<float> want = want_json.get<std::vector<float>>();
  if (int64_t(got.size()) != vocab || at.size() != want.size()) return NAN;
  double gap = 0, scale = 0;
  for (size_t i = 0; i < at.size(); ++i) {
    if (at[i] < 0 || at[i] >= vocab || !std::isfinite(got[size_t(at[i])])) return NAN;
    gap = std::max(gap, double(std::fabs(got[size_t(at[i])] - want[i])));
    scale = std::max(scale, double(std::fabs(want[i])));
  }
  return gap / std::max(scale, 1e-30);
}

// 6. The reference's logits (prompt_image_golden.py) within `tolerance` of the largest reference value,
// at the indices the golden keeps; its positions and rope delta exactly.
int compare_golden(BatchEngine& e, Runner& run, const std::string& path, double tolerance) {
  if (!std::filesystem::exists(path)) {
    std::printf("skip %s is missing: it is made on the GPU machine by tools/reference/prompt_image_golden.py "
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

// A plan without a vision tower: image input is refused, naming it.
int check_refused(BatchEngine& e) {
  const PromptImages im = images(1, {{1, 2, 2}}, 1536);
  std::string said;
  try {
    e.reset_state(0);
    e.set_images(0, std::vector<int32_t>{1, 2}, im, 0);
  } catch (const Error& err) {
    said = err.what();
  }
  return report(said.find("vision tower") != std::string::npos,
                "a plan without a vision tower refuses image input: " + (said.empty() ? "(accepted)" : said));
}

}  // namespace
}  // namespace image_check

int run_image_check(BatchEngine& e, const ImageCheckOptions& o) {
  using namespace image_check;
  const Plan& plan = e.plan();
  if (!plan.vision) return check_refused(e);
  if (plan.max_streams < kSlots || plan.state_snapshots < 1)
    fail("imagecheck: the plan has {} streams and {} state snapshots; the checks use {} slots and one snapshot",
         plan.max_streams, plan.state_snapshots, kSlots);
  const PlanVision& v = *plan.vision;
  const int patch_dim = v.tower.patch_dim();
  const int32_t pad = v.image_token, vs = v.vision_start_token, ve = v.vision_end_token;
  // Computations of the same rows by different calls: bitwise on an exact engine, else within the
  // tolerance; inputs that must change the logits: clear of what those may differ by (file comment).
  const bool bitwise = o.exact;
  const double distinct = o.exact ? kDistinctGap : std::max(kDistinctGap, 2 * o.tolerance);
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
  for (int s = 0; s < kSlots; ++s) e.bind_pages(s, run.own_pages(s));
  int failures = 0;

  // One image [1, 4, 6] (6 tokens) between 3 and 2 text tokens: 13 tokens; delta -3 (vision-tower.md).
  const std::vector<int32_t> one = cat({words(3), {vs}, pads(6), {ve}, words(2)});
  const PromptImages im1 = images(11, {{1, 4, 6}}, patch_dim), im1b = images(12, {{1, 4, 6}}, patch_dim);

  // 1. Deterministic: the same calls, bitwise on every engine.
  const std::vector<Logits> a = run.alone(0, one, im1, kSteps);
  const std::vector<Logits> a2 = run.alone(2, one, im1, kSteps);
  bool det = true;
  for (size_t i = 0; i < a.size(); ++i) det = det && same(a[i], a2[i]);
  failures += report(det, fmt::format("a one-image prompt gives the same logits twice, in two slots (prompt + {} greedy "
                                      "steps), bit for bit", kSteps));

  // 2. The image counts.
  const Logits other = run.start(1, one, im1b);
  const Logits none = run.start(1, one, PromptImages{});
  failures += report(relative_gap(other, a[0]) > distinct,
                     fmt::format("another image gives other logits (gap {:.3g} of the largest, above {:.3g})",
                                 relative_gap(other, a[0]), distinct));
  failures += report(relative_gap(none, a[0]) > distinct,
                     fmt::format("the image_pad tokens' own embeddings give other logits (gap {:.3g}, above {:.3g})",
                                 relative_gap(none, a[0]), distinct));

  // 3. Batched: a two-image prompt ([1, 2, 2]: 1 token; [1, 4, 4]: 4 tokens) beside the one-image one,
  // each row fed the token it was fed decoding alone, so both decode the same sequences.
  const std::vector<int32_t> two = cat({words(2), {vs}, pads(1), {ve}, words(4), {vs}, pads(4), {ve}, words(3)});
  const PromptImages im2 = images(21, {{1, 2, 2}, {1, 4, 4}}, patch_dim);
  const std::vector<Logits> b = run.alone(1, two, im2, kSteps);
  const Logits a_again = run.start(0, one, im1);  // slot 0 back at a's prompt: the same calls as a's
  const Logits b_again = run.start(1, two, im2);
  const bool again = same(a_again, a[0]) && same(b_again, b[0]);
  Agreement batched(bitwise, o.tolerance);
  for (int s = 0; s < kSteps; ++s) {
    const std::vector<Logits> rows = run.decode({0, 1}, {run.greedy(a[size_t(s)]), run.greedy(b[size_t(s)])},
                                                {int64_t(one.size()) + s, int64_t(two.size()) + s});
    batched.add(rows[0], a[size_t(s) + 1]);
    batched.add(rows[1], b[size_t(s) + 1]);
  }
  failures += report(again && batched.ok(),
                     fmt::format("a two-image and a one-image prompt decoded together give each its logits alone ({}; "
                                 "their prompts again {})", batched.said(), again ? "bit for bit" : "NOT bit for bit"));
  const int64_t want_two = vision::mrope_positions(two, pad, im2.grids, v.tower.merge).delta;
  failures += report(e.rope_delta(0) == -3 && e.rope_delta(1) == want_two,
                     fmt::format("rope deltas {} (by hand: -3) and {} (mrope_positions: {})", e.rope_delta(0),
                                 e.rope_delta(1), want_two));

  // 4. The rope delta carries decoded tokens: decode one's last token instead of prefilling it, on an
  // inexact engine within the tolerance (another path). That bound can be wider than what the rotary
  // position moves the logits by (a few hundredths on the tiny fuel), so the position is checked with
  // the same decode call, from the same state and KV (slot 4 restored from slot 3's state after the
  // head, reading slot 3's pages): given the images again (all of the head computed) it repeats the
  // row bit for bit; without them (restore_state forgets them: delta 0, the row at its index) it gives
  // other logits. One call on one input, only the position apart: any gap is the position's, so 1e-3
  // is the bound on every engine.
  const std::vector<int32_t> head(one.begin(), one.end() - 1);
  const std::vector<int64_t> last_pos{int64_t(head.size())};
  run.start(3, head, im1);
  e.capture_state(3, 0);
  const Logits at_delta = run.decode({3}, {one.back()}, last_pos)[0];
  Agreement decoded(false, o.exact ? kFp32OrderGap : o.tolerance);
  decoded.add(at_delta, a[0]);
  auto from_head = [&](bool with_images) {
    e.restore_state(0, 4);
    e.bind_pages(4, run.own_pages(3));
    if (with_images) e.set_images(4, head, im1, int64_t(head.size()));
    const Logits row = run.decode({4}, {one.back()}, last_pos)[0];
    e.bind_pages(4, run.own_pages(4));
    return std::pair(row, e.rope_delta(4));
  };
  const auto [again_row, again_delta] = from_head(true);
  const auto [index_row, index_delta] = from_head(false);
  const double at_index = relative_gap(index_row, at_delta);
  failures += report(decoded.ok() && e.rope_delta(3) == -3,
                     fmt::format("the last token decoded at index + delta gives its prefilled logits ({}; delta {})",
                                 decoded.said(), e.rope_delta(3)));
  failures += report(same(again_row, at_delta) && again_delta == -3 && index_delta == 0 && at_index > kDistinctGap,
                     fmt::format("the same decode from the same state: restored with the images (delta {}) {}; "
                                 "without (delta {}, the row at its index) other logits (gap {:.3g}, above {:.3g})",
                                 again_delta, same(again_row, at_delta) ? "bit for bit" : "NOT bit for bit",
                                 index_delta, at_index, kDistinctGap));

  // 5. Refusals: slot 2 set to `one` with its image, then images that do not match it.
  std::string said;
  e.reset_state(2);
  e.set_images(2, one, im1, 0);
  const int64_t set_delta = e.rope_delta(2);
  try {
    e.set_images(2, one, images(13, {{1, 4, 4}}, patch_dim), 0);  // 4 tokens where the prompt has 6
  } catch (const Error& err) {
    said = err.what();
  }
  failures += report(!said.empty() && set_delta == -3 && e.rope_delta(2) == 0,
                     "images that do not match the prompt are refused, the slot left text: " +
                         (said.empty() ? std::string("(accepted)") : said));

  // 7. Resumed from the cache at the first page boundary P: slot 0 computes the prompt in calls, one
  // ending at P, and captures its state there (snapshot 0); slot 1 restores it, reads slot 0's first
  // page, is given `warm` images with P tokens computed and computes the rest. Both return the last
  // row's logits.
  const int P = plan.kv_page_tokens;
  auto resumed = [&](const std::vector<int32_t>& prompt, const PromptImages& cold, const PromptImages& warm) {
    e.reset_state(0);
    e.set_images(0, prompt, cold, 0);
    const Logits want = run.prefill(0, prompt, 0, P, /*capture=*/true);
    std::vector<int> pages = run.own_pages(1);
    pages[0] = run.own_pages(0)[0];
    e.restore_state(0, 1);
    e.bind_pages(1, pages);
    e.set_images(1, prompt, warm, P);
    const Logits got = run.prefill(1, prompt, P);
    e.bind_pages(1, run.own_pages(1));
    return std::pair(want, got);
  };
  if (P < 80 || P + 64 > plan.max_context) {
    std::printf("skip resuming from the cache: pages of %d tokens in a context of %d leave no room for the prompts\n",
                P, plan.max_context);
  } else {
    // Inside: 15 of a 64-token image ([1, 16, 16]) before P, 2 text tokens after it: the last row's
    // logits lean on the image's rows after P (on the tiny fuel another image moves them by ~0.5 of the
    // largest, against ~0.15 with 32 image tokens and 30 text tokens after), so the check stays clear of
    // an inexact engine's twice the tolerance.
    const int before_image = P - 16;
    const std::vector<int32_t> inside = cat({words(before_image), {vs}, pads(64), {ve}, words(2)});
    const PromptImages im7 = images(71, {{1, 16, 16}}, patch_dim), im7b = images(72, {{1, 16, 16}}, patch_dim);
    const auto [cold_in, warm_in] = resumed(inside, im7, im7);
    Agreement inside_ok(bitwise, o.tolerance);
    inside_ok.add(warm_in, cold_in);
    failures += report(inside_ok.ok(), fmt::format("a prompt resumed at a page boundary {} tokens into its image gives the "
                                            "logits of computing it whole ({})", P - before_image - 1, inside_ok.said()));
    const double other_in = relative_gap(resumed(inside, im7, im7b).second, warm_in);
    failures += report(other_in > distinct,
                       fmt::format("resumed inside an image, its rows after the boundary are the image's: another "
                                   "image's give other logits (gap {:.3g}, above {:.3g})", other_in, distinct));
    // Past: a 32-token image wholly before P, an 8-token one ([1, 4, 8]) after it; resumed with the
    // first image's patches replaced by another image's, which no row reads.
    const std::vector<int32_t> past =
        cat({words(P - 80), {vs}, pads(32), {ve}, words(60), {vs}, pads(8), {ve}, words(5)});
    const PromptImages im7c = images(73, {{1, 8, 16}, {1, 4, 8}}, patch_dim);
    const PromptImages im7d = images(74, {{1, 8, 16}}, patch_dim);
    PromptImages im7c_warm = im7c;
    std::copy_n(im7d.patches.begin(), im7d.patches.size(), im7c_warm.patches.begin());
    const auto [cold_past, warm_past] = resumed(past, im7c, im7c_warm);
    Agreement past_ok(bitwise, o.tolerance);
    past_ok.add(warm_past, cold_past);
    failures += report(past_ok.ok() && e.rope_delta(1) == e.rope_delta(0),
                       fmt::format("a prompt resumed past its first image gives the logits of computing it whole with "
                                   "that image's patches replaced (no row reads them), the second image's rows read ({})",
                                   past_ok.said()));
  }
  // 8. Keyed images (PromptImages::digests, as the scheduler hands them): the logits of the same
  // images unkeyed, bit for bit, on every engine: the H200 engine encodes a keyed image once into its
  // encoder cache and reads its rows there (vision-tower.md, "In the H200 engine"), which must not
  // change a bit. Three ways: one call; the same prompt again in another slot (read from the cache);
  // the 64-token image of check 7 prefilled in two calls that split it (the second call reads the
  // rows the first one cached).
  {
    const auto keyed = [](PromptImages im, uint8_t tag) {
      for (size_t i = 0; i < im.grids.size(); ++i) {
        ImageDigest d;
        d.bytes.fill(tag);
        d.bytes[0] = uint8_t(i);
        im.digests.push_back(d);
      }
      return im;
    };
    Agreement cached(true, 0);
    cached.add(run.start(0, one, keyed(im1, 0xa1)), a[0]);
    cached.add(run.start(2, one, keyed(im1, 0xa1)), a[0]);
    const std::vector<int32_t> split = cat({words(20), {vs}, pads(64), {ve}, words(3)});
    const PromptImages im8 = images(81, {{1, 16, 16}}, patch_dim);
    const int cut = 20 + 1 + 30;  // the first call ends 30 tokens into the image
    const auto in_two = [&](const PromptImages& im) {
      e.reset_state(1);
      e.set_images(1, split, im, 0);
      return run.prefill(1, split, 0, cut);
    };
    cached.add(in_two(keyed(im8, 0xa2)), in_two(im8));
    failures += report(cached.ok(), fmt::format("keyed images (the encoder cache where the engine keeps one) give the "
                                                "logits of unkeyed ones: one call, again from another slot, an image "
                                                "split over two calls ({})", cached.said()));
  }
  if (!o.golden.empty()) failures += compare_golden(e, run, o.golden, o.tolerance);
  return failures ? 1 : 0;
}

std::optional<int> parse_image_check_command(const std::vector<std::string>& args, ImageCheckOptions& o,
                                             const std::string& tolerance_help) {
  CLI::App cli("Prompts with images: deterministic, the image counts, batched as alone, decoded tokens at the rope "
               "delta, refusals, resumed from the prefix cache, the HF reference's logits; a plan without a tower "
               "refuses them.",
               "rocket-engine imagecheck");
  cli.add_option("--golden", o.golden,
                 "the HF reference's logits of prompts with images (tools/reference/prompt_image_golden.py); a missing "
                 "file skips that check, saying so");
  cli.add_option("--tolerance", o.tolerance, tolerance_help)->check(in_range(0, 1))->capture_default_str();
  return parse_command(cli, args);
}

}  // namespace rocket
