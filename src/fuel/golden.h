// Golden vectors from the HF reference (tools/reference/golden.py) and the parity measures the
// engines are held to. A golden file holds, per prompt, the prompt ids, the reference's free-running
// greedy ids, and for every position of prompt + greedy: the top-64 logits, logsumexp, the top-1/top-2
// margin and every 97th logit (a fixed sample across the whole vocabulary).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rocket {

struct GoldenPosition {
  int32_t input_id = 0;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logits;
  float logsumexp = 0, margin = 0;
  std::vector<float> sample;  // logits[0::sample_stride]
};

struct GoldenPrompt {
  std::string text;
  std::vector<int32_t> prompt_ids, greedy_ids;
  std::vector<GoldenPosition> positions;  // prompt_ids.size() + greedy_ids.size() entries
  std::vector<float> full_last_prompt;    // full logits at the last prompt position, when provided
};

struct Golden {
  std::string fuel, dtype;
  int sample_stride = 97;
  int vocab = 0;
  std::vector<GoldenPrompt> prompts;
};

// Error naming the file on malformed input. `full_logits_path` may be empty.
Golden load_golden(const std::string& json_path, const std::string& full_logits_path);

// The difference between an engine's logits row and the reference at one position: the largest
// absolute difference over the reference's top-64 and the strided sample, relative to the row's
// largest reference magnitude (the logit scale), plus the first coordinate attaining it.
struct LogitDiff {
  float max_abs = 0, scale = 1, rel = 0;
  int32_t worst_id = -1;
  float ref = 0, got = 0;
};
LogitDiff compare_logits(const GoldenPosition& ref, int sample_stride, const float* logits, int vocab);
LogitDiff compare_full(const std::vector<float>& ref, const float* logits, int vocab);

}  // namespace rocket
