#include "gate/gate.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "core/read_file.h"
#include "core/shell_quote.h"
#include "engine/score.h"
#include "plan/plan.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace rocket {
namespace {

// A temporary directory, removed with everything in it when the run ends.
class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "rocket-gate-XXXXXX").string();
    if (!::mkdtemp(t.data())) fail("gate: cannot make a temporary directory");
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// One engine's `score` run, its stdout read through a pipe.
class ScoreRun {
 public:
  ScoreRun(const std::string& engine_dir, const fs::path& windows, int greedy) : engine_(engine_dir) {
    const fs::path exe = fs::path(engine_dir) / "bin" / "rocket-engine";
    if (!fs::exists(exe)) fail("gate: {} has no bin/rocket-engine (an engine directory from rocket build)", engine_dir);
    std::string cmd = shell_quote(exe.string()) + " score --windows " + shell_quote(windows.string());
    if (greedy) cmd += fmt::format(" --greedy {}", greedy);
    pipe_ = ::popen(cmd.c_str(), "r");
    if (!pipe_) fail("gate: cannot start {}", cmd);
  }
  ~ScoreRun() {
    if (pipe_) ::pclose(pipe_);
  }
  void read(void* into, size_t bytes) {
    if (std::fread(into, 1, bytes, pipe_) != bytes) finish("its output ended early");
  }
  // Waits for the engine; Error unless it exited 0 having written nothing more.
  void finish(const char* why = nullptr) {
    const bool extra = !why && std::fgetc(pipe_) != EOF;
    const int status = ::pclose(pipe_);
    pipe_ = nullptr;
    if (why || extra || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail("gate: {}'s score failed: {} (exit status {})", engine_, why ? why : extra ? "it wrote more than asked" : "",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }

 private:
  std::string engine_;
  std::FILE* pipe_ = nullptr;
};

}  // namespace

GateReport run_gate(const GateOptions& o) {
  const Plan ref_plan = Plan::load((fs::path(o.reference) / "plan.json").string());
  const Plan cand_plan = Plan::load((fs::path(o.candidate) / "plan.json").string());
  const int V = ref_plan.chemistry.vocab;
  if (cand_plan.chemistry.vocab != V)
    fail("gate: vocabularies of {} and {} tokens: not engines of one fuel", V, cand_plan.chemistry.vocab);
  const fs::path ref_tok = fs::path(o.reference) / "tokenizer.json";
  if (read_file(ref_tok.string()) != read_file((fs::path(o.candidate) / "tokenizer.json").string()))
    fail("gate: {} and {} have different tokenizers: not engines of one fuel", o.reference, o.candidate);
  const int longest = std::max(o.window_tokens, o.greedy_prompt_tokens + o.greedy_tokens);
  for (const Plan* p : {&ref_plan, &cand_plan})
    if (p->max_context < longest)
      fail("gate: windows of {} tokens, but an engine's context is {}", longest, p->max_context);
  if (o.greedy_prompts > o.windows || o.greedy_prompt_tokens > o.window_tokens)
    fail("gate: the greedy prompts are the first {} tokens of the first {} windows; there are {} of {}",
         o.greedy_prompt_tokens, o.greedy_prompts, o.windows, o.window_tokens);

  const Tokenizer tok = Tokenizer::load(ref_tok.string());
  const std::vector<int32_t> ids = tok.encode(read_file(o.text));
  const size_t need = size_t(o.windows) * size_t(o.window_tokens);
  if (ids.size() < need)
    fail("gate: {} is {} tokens, {} windows of {} need {}", o.text, ids.size(), o.windows, o.window_tokens, need);
  ScoreWindows scored{.length = o.window_tokens, .ids = {ids.begin(), ids.begin() + std::ptrdiff_t(need)}};
  ScoreWindows prompts{.length = o.greedy_prompt_tokens, .ids = {}};
  for (int w = 0; w < o.greedy_prompts; ++w) {
    const auto* at = scored.ids.data() + size_t(w) * size_t(o.window_tokens);
    prompts.ids.insert(prompts.ids.end(), at, at + o.greedy_prompt_tokens);
  }
  TempDir tmp;
  save_score_windows((tmp.path() / "scored.rktw").string(), scored);
  save_score_windows((tmp.path() / "prompts.rktw").string(), prompts);

  GateMetrics metrics;
  {
    ScoreRun ref(o.reference, tmp.path() / "scored.rktw", 0), cand(o.candidate, tmp.path() / "scored.rktw", 0);
    std::vector<float> r(static_cast<size_t>(V)), c(static_cast<size_t>(V));
    for (int w = 0; w < o.windows; ++w)
      for (int i = 0; i < o.window_tokens; ++i) {
        ref.read(r.data(), r.size() * 4);
        cand.read(c.data(), c.size() * 4);
        const int32_t target = i + 1 < o.window_tokens ? scored.ids[size_t(w) * o.window_tokens + i + 1] : -1;
        metrics.add_row(r, c, target);
      }
    ref.finish();
    cand.finish();
  }
  if (o.greedy_prompts > 0 && o.greedy_tokens > 0) {
    ScoreRun ref(o.reference, tmp.path() / "prompts.rktw", o.greedy_tokens);
    ScoreRun cand(o.candidate, tmp.path() / "prompts.rktw", o.greedy_tokens);
    std::vector<int32_t> r(static_cast<size_t>(o.greedy_tokens)), c(static_cast<size_t>(o.greedy_tokens));
    for (int p = 0; p < o.greedy_prompts; ++p) {
      ref.read(r.data(), r.size() * 4);
      cand.read(c.data(), c.size() * 4);
      metrics.add_greedy(r, c);
    }
    ref.finish();
    cand.finish();
  }

  GateReport report;
  report.figures = metrics.figures();
  report.violations = gate_violations(report.figures, o.thresholds);
  report.json = {{"candidate", {{"engine", o.candidate}, {"precision", quantised_roles(cand_plan.chemistry)},
                                {"booster", cand_plan.booster}}},
                 {"reference", {{"engine", o.reference}, {"precision", quantised_roles(ref_plan.chemistry)},
                                {"booster", ref_plan.booster}}},
                 {"fuel_fingerprint", ref_plan.chemistry.fingerprint()},
                 {"text", o.text},
                 {"windows", o.windows},
                 {"window_tokens", o.window_tokens},
                 {"greedy_prompt_tokens", o.greedy_prompt_tokens},
                 {"figures", report.figures.to_json()},
                 {"thresholds", o.thresholds.to_json()},
                 {"violations", report.violations},
                 {"passed", report.violations.empty()}};
  return report;
}

}  // namespace rocket
