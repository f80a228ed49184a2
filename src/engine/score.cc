#include "engine/score.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/cli.h"
#include "core/error.h"

namespace rocket {
namespace {

constexpr char kMagic[4] = {'R', 'K', 'T', 'W'};

void write_all(std::FILE* out, const void* data, size_t bytes) {
  if (std::fwrite(data, 1, bytes, out) != bytes) fail("score: writing the output failed (the reader went away?)");
}

}  // namespace

ScoreWindows load_score_windows(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot open", path);
  char magic[4];
  uint32_t n = 0, length = 0;
  f.read(magic, 4);
  f.read(reinterpret_cast<char*>(&n), 4);
  f.read(reinterpret_cast<char*>(&length), 4);
  if (!f || std::memcmp(magic, kMagic, 4) != 0) fail("{}: not a windows file (no RKTW header)", path);
  if (n == 0 || length == 0 || uint64_t(n) * length > (1u << 28)) fail("{}: {} windows of {} tokens", path, n, length);
  ScoreWindows w;
  w.length = int(length);
  w.ids.resize(size_t(n) * length);
  f.read(reinterpret_cast<char*>(w.ids.data()), std::streamsize(w.ids.size() * 4));
  if (!f) fail("{}: shorter than its header says ({} windows of {} tokens)", path, n, length);
  if (f.peek() != std::char_traits<char>::eof()) fail("{}: longer than its header says", path);
  return w;
}

void save_score_windows(const std::string& path, const ScoreWindows& w) {
  std::ofstream f(path, std::ios::binary);
  const uint32_t n = uint32_t(w.count()), length = uint32_t(w.length);
  f.write(kMagic, 4);
  f.write(reinterpret_cast<const char*>(&n), 4);
  f.write(reinterpret_cast<const char*>(&length), 4);
  f.write(reinterpret_cast<const char*>(w.ids.data()), std::streamsize(w.ids.size() * 4));
  if (!f) fail("{}: write failed", path);
}

std::optional<int> parse_score_command(const std::vector<std::string>& args, ScoreWindows& windows, int& greedy) {
  std::string path;
  greedy = 0;
  CLI::App cli("Streams next-token log-probabilities over token windows (or their greedy continuations) to stdout,\n"
               "for `rocket gate`.",
               "rocket-engine score");
  cli.add_option("--windows", path, "token windows (RKTW file, written by rocket gate)")->required()->check(CLI::ExistingFile);
  cli.add_option("--greedy", greedy, "write each window's greedy continuation of N tokens instead")
      ->check(at_least(0))
      ->capture_default_str();
  if (const auto rc = parse_command(cli, args)) return rc;
  windows = load_score_windows(path);
  return std::nullopt;
}

void run_score(BatchEngine& e, const PrefillRows& prefill_rows, const ScoreWindows& w, int greedy, std::FILE* out) {
  const int V = e.vocab();
  const int chunk = e.plan().prefill_chunk;
  if (int64_t(w.length) + greedy > e.plan().max_context)
    fail("score: windows of {} tokens + {} greedy exceed the plan's context of {}", w.length, greedy,
         e.plan().max_context);
  for (int32_t id : w.ids)
    if (id < 0 || id >= V) fail("score: token id {} is outside the vocabulary [0, {})", id, V);

  if (greedy == 0) {
    std::vector<float> logp(static_cast<size_t>(V));
    for (int i = 0; i < w.count(); ++i) {
      const int32_t* ids = w.ids.data() + size_t(i) * w.length;
      e.reset_state(0);
      for (int at = 0; at < w.length; at += chunk) {
        const int n = std::min(chunk, w.length - at);
        const float* rows = prefill_rows(0, ids + at, n, at);
        for (int r = 0; r < n; ++r) {
          const float* l = rows + int64_t(r) * V;
          const float top = *std::max_element(l, l + V);
          double sum = 0;
          for (int v = 0; v < V; ++v) sum += std::exp(double(l[v]) - top);
          const double lse = top + std::log(sum);
          for (int v = 0; v < V; ++v) logp[size_t(v)] = float(double(l[v]) - lse);
          write_all(out, logp.data(), logp.size() * 4);
        }
      }
    }
    std::fflush(out);
    return;
  }

  const int S = e.plan().max_streams;
  for (int first = 0; first < w.count(); first += S) {
    const int P = std::min(S, w.count() - first);
    std::vector<int64_t> pos(static_cast<size_t>(P), w.length);
    std::vector<int32_t> next(static_cast<size_t>(P));
    std::vector<int> slots(static_cast<size_t>(P));
    std::vector<SamplingKnobs> knobs(static_cast<size_t>(P), SamplingKnobs{.temperature = 0.0f});
    std::vector<std::vector<int32_t>> made(static_cast<size_t>(P));
    for (int p = 0; p < P; ++p) {
      slots[size_t(p)] = p;
      e.reset_state(p);
      const int32_t* ids = w.ids.data() + size_t(first + p) * w.length;
      for (int at = 0; at < w.length; at += chunk) {
        const int n = std::min(chunk, w.length - at);
        const bool last = at + n == w.length;
        e.prefill(p, ids + at, n, at, last ? &knobs[size_t(p)] : nullptr, last);
      }
      next[size_t(p)] = e.tokens()[0];
    }
    for (int s = 0; s < greedy; ++s) {
      for (int p = 0; p < P; ++p) made[size_t(p)].push_back(next[size_t(p)]);
      if (s + 1 == greedy) break;
      e.decode(P, next.data(), slots.data(), pos.data(), knobs.data(), /*want_logits=*/false);
      for (int p = 0; p < P; ++p) {
        next[size_t(p)] = e.tokens()[p];
        ++pos[size_t(p)];
      }
    }
    for (const auto& m : made) write_all(out, m.data(), m.size() * 4);
  }
  std::fflush(out);
}

}  // namespace rocket
