// Scoring for the quality gate (`rocket gate`, src/gate/): an engine's next-token distributions over
// fixed token windows, and its greedy continuations of them, streamed to the gate, which compares two
// engines of one fuel (say NVFP4 against BF16) row by row without either touching the disk.
//
//   rocket-engine score --windows FILE [--greedy N]
//
// FILE: "RKTW", u32 windows, u32 length, then windows × length little-endian int32 token ids.
// stdout, binary, little-endian:
//   without --greedy: for every window, every position's log-probabilities (vocab float32 each, the
//     log-softmax of the logits in FP64), each window prefilled alone in the plan's chunks;
//   with --greedy N: for every window, N int32 ids, its greedy continuation with the window as the
//     prompt; windows decode together, as many as the engine has streams.
// The same run on every engine, over the scheduler's interface (like parity.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "engine/parity.h"
#include "scheduler/batch_engine.h"

namespace rocket {

struct ScoreWindows {
  int length = 0;
  std::vector<int32_t> ids;  // windows × length
  int count() const { return length ? int(ids.size() / size_t(length)) : 0; }
};

// Error naming the file when it is not a well-formed windows file.
ScoreWindows load_score_windows(const std::string& path);
void save_score_windows(const std::string& path, const ScoreWindows& w);

// `rocket-engine score`'s flags, one table for every engine. Returns the exit status when the command
// ends here (--help, a refused flag); otherwise fills `windows` and `greedy` (0: distributions).
std::optional<int> parse_score_command(const std::vector<std::string>& args, ScoreWindows& windows, int& greedy);

// Writes what the file comment says to `out`. Error when a window holds an id outside the vocabulary
// or a window (plus the greedy tokens) exceeds the plan's context.
void run_score(BatchEngine& engine, const PrefillRows& prefill_rows, const ScoreWindows& windows, int greedy,
               std::FILE* out);

}  // namespace rocket
