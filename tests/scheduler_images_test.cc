// The Scheduler's prefix cache with images (docs/images.md, "In the scheduler"), driven with a
// BatchEngine double whose plan carries a vision tower (the scheduler, cache, prompt builder with a
// template that places images, image decoding and generations are the real ones): a resent image
// resumes past its tokens, and set_images is told how far; another image at the same place resumes
// no further than its first image token; the prefix reports to the front say the same; the choices of
// n = 2 resume through the cache with the images set again.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "image_fixtures.h"
#include "openai/openai_request.h"
#include "qwen_fixtures.h"
#include "scheduler/batch_engine.h"
#include "scheduler/scheduler.h"
#include "scheduler_fixtures.h"
#include "test_paths.h"

namespace rocket {
namespace {

using test::base64;

using Json = nlohmann::ordered_json;

constexpr int32_t kImagePad = 151655;  // Qwen3's <|image_pad|>

// Picks a token from the row's input and position; records every set_images.
class ImageEngine : public BatchEngine {
 public:
  struct SetImages {
    int64_t first_pad = -1, end_pad = -1;  // the prompt's first image token, one past its last
    int64_t computed = 0;
    size_t images = 0;
  };

  explicit ImageEngine(Plan plan) : plan_(std::move(plan)), contract_(plan_), logits_(size_t(plan_.chemistry.vocab), 0.f) {}

  const Plan& plan() const override { return plan_; }
  const StepContract& contract() const override { return contract_; }
  int vocab() const override { return plan_.chemistry.vocab; }
  void prefill(int slot, const int32_t* ids, int n, int64_t pos0, const SamplingKnobs*, bool, const PrefillCapture*) override {
    tokens_.assign(1, pick(ids[n - 1], pos0 + n - 1));
  }
  void prefill_batch(std::span<const PrefillSegment> segments, int) override {
    tokens_.clear();
    for (const PrefillSegment& s : segments) tokens_.push_back(pick(s.ids[s.n - 1], s.pos0 + s.n - 1));
  }
  void decode(int n, const int32_t* ids, const int*, const int64_t* pos, const SamplingKnobs*, bool) override {
    tokens_.clear();
    for (int i = 0; i < n; ++i) tokens_.push_back(pick(ids[i], pos[i]));
  }
  const int32_t* tokens() const override { return tokens_.data(); }
  const float* logits(int) const override { return logits_.data(); }
  void set_images(int, std::span<const int32_t> prompt, const vision::PromptImages& images, int64_t computed) override {
    SetImages c{.computed = computed, .images = images.grids.size()};
    for (size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] == kImagePad) {
        if (c.first_pad < 0) c.first_pad = int64_t(i);
        c.end_pad = int64_t(i) + 1;
      }
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(c);
  }
  std::vector<SetImages> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  void reset_state(int) override {}
  void bind_pages(int, std::span<const int>) override {}
  void copy_page(int, int, int) override {}
  void bind_pad_page(int) override {}
  void capture_state(int, int) override {}
  void restore_state(int, int) override {}
  void time_steps(int, StepObserver) override {}
  void reset_history(int, std::span<const int32_t>, std::span<const LogitBias>) override {}

 private:
  static int32_t pick(int32_t last, int64_t pos) { return int32_t(100 + (int64_t(last) * 31 + pos * 7) % 900); }

  Plan plan_;
  StepContract contract_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
  mutable std::mutex mu_;
  std::vector<SetImages> calls_;
};

// The tiny plan in small with the releases' tower geometry (patch 16, temporal 2, merge 2) and Qwen3's
// image tokens: all the scheduler reads of Plan::vision.
Plan vision_plan() {
  Plan p = test::small_tiny_plan();
  PlanVision v;
  v.image_token = kImagePad;
  v.vision_start_token = 151652;
  v.vision_end_token = 151653;
  p.vision = v;
  return p;
}

// A user message of text, a 96x64 PNG (70 image tokens under the releases' bounds) of `seed`'s
// pattern, and more text: long enough on both sides to span pages.
CompletionRequest image_request(uint32_t seed, int n = 1) {
  std::string before = "Remember this list:", after = "And this one:";
  for (int i = 0; i < 60; ++i) before += " item " + std::to_string(i) + ",";
  for (int i = 0; i < 120; ++i) after += " entry " + std::to_string(i) + ",";
  const std::string url = "data:image/png;base64," + base64(test::encode_png(test::pattern_image(96, 64, seed)));
  const Json body = {{"model", "tiny"},
                     {"max_tokens", 6},
                     {"temperature", 0},
                     {"n", n},
                     {"messages", Json::array({{{"role", "user"},
                                                {"content", Json::array({{{"type", "text"}, {"text", before}},
                                                                         {{"type", "image_url"}, {"image_url", {{"url", url}}}},
                                                                         {{"type", "text"}, {"text", after}}})}}})}};
  return parse_chat_request(body);
}

PromptBuilder image_prompts() {
  std::ifstream in(test::source_dir() + "/tests/fixtures/xml_tools/chat_template.jinja");
  std::stringstream text;
  text << in.rdbuf();
  return test::builder_with("scheduler_images", text.str());
}

class SchedulerImages : public ::testing::Test {
 protected:
  SchedulerImages() : engine_(vision_plan()), scheduler_(image_prompts(), engine_, ModelInfo{"tiny", {}}) {}

  // The request's answers (every choice's final usage) and the set_images calls its admissions made.
  struct Served {
    std::vector<Usage> usage;
    std::string text;
    std::vector<ImageEngine::SetImages> calls;
  };
  Served serve(const CompletionRequest& r) {
    const size_t before = engine_.calls().size();
    auto sink = std::make_shared<RequestSink>(int(r.n));
    scheduler_.submit(r, sink);
    Served s;
    for (int c = 0; c < r.n; ++c) {
      const test::Answer a = test::wait_answer(*sink);
      EXPECT_EQ(a.last.error, "");
      s.usage.push_back(a.last.usage);
      if (c == 0) s.text = a.text;
    }
    const std::vector<ImageEngine::SetImages> all = engine_.calls();
    s.calls.assign(all.begin() + long(before), all.end());
    return s;
  }
  int page() const { return engine_.plan().kv_page_tokens; }

  ImageEngine engine_;
  Scheduler scheduler_;
};

TEST_F(SchedulerImages, AResentImageResumesPastItAndAnotherImageDoesNot) {
  const Served a = serve(image_request(1));
  ASSERT_EQ(a.calls.size(), 1u);
  const ImageEngine::SetImages cold = a.calls[0];
  ASSERT_EQ(cold.end_pad - cold.first_pad, 70);
  ASSERT_GT(int64_t(a.usage[0].prompt_tokens), cold.end_pad + page()) << "the text after the image spans a page";
  EXPECT_LE(cold.computed, cold.first_pad);
  EXPECT_EQ(int64_t(a.usage[0].cached_tokens), cold.computed);

  // The same image: resumed past its tokens, and set_images told so.
  const Served again = serve(image_request(1));
  ASSERT_EQ(again.calls.size(), 1u);
  EXPECT_GE(again.calls[0].computed, cold.end_pad);
  EXPECT_EQ(again.calls[0].computed % page(), 0);
  EXPECT_EQ(int64_t(again.usage[0].cached_tokens), again.calls[0].computed);
  EXPECT_EQ(again.text, a.text);

  // Another image at the same place: nothing past its first image token.
  const Served other = serve(image_request(2));
  ASSERT_EQ(other.calls.size(), 1u);
  EXPECT_EQ(other.calls[0].first_pad, cold.first_pad);
  EXPECT_LE(other.calls[0].computed, cold.first_pad);
  EXPECT_LE(int64_t(other.usage[0].cached_tokens), cold.first_pad);

  // The prefix reports say what admission would do: image 1 past its tokens; a third image, never
  // sent, no further than its first token.
  const PrefixReport resent = scheduler_.report_prefix(image_request(1));
  EXPECT_EQ(resent.resumable_tokens, again.calls[0].computed);
  EXPECT_GE(resent.cached_tokens, cold.end_pad);
  const PrefixReport unseen = scheduler_.report_prefix(image_request(3));
  EXPECT_LE(unseen.resumable_tokens, cold.first_pad);
  EXPECT_LE(unseen.cached_tokens, cold.first_pad);
}

TEST_F(SchedulerImages, TheChoicesOfNTwoResumeThroughTheCacheWithTheirImages) {
  const Served two = serve(image_request(5, /*n=*/2));
  ASSERT_EQ(two.calls.size(), 2u);  // choice 0, then the fork admitted through the cache
  EXPECT_LE(two.calls[0].computed, two.calls[0].first_pad);
  EXPECT_GE(two.calls[1].computed, two.calls[1].end_pad) << "the fork resumes from the prompt's last page boundary";
  for (const ImageEngine::SetImages& c : two.calls) EXPECT_EQ(c.images, 1u);
}

}  // namespace
}  // namespace rocket
