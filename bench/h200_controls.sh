#!/usr/bin/env bash
# What the decoding controls (issue 23) cost a decode step on the H200, at bucket 16 (and 1 and 32):
# greedy and Qwen3.5's sampled knobs, each plain, with penalties and 40 logit biases (every stream's
# sampling history read and counted by the sampler), and with every row under a grammar mask read from
# mapped pinned memory (rocket-engine bench --masked; the loop thread's mask computation is measured on
# the CPU by bench/grammar.sh). Runs on the GPU machine from tools/device/h200_engine.sh:
#   ENGINE=/tmp/h200-engines/a3b-nvfp4 RESULTS=$OUT bash bench/h200_controls.sh
# Appends to RESULTS/h200-controls.md (default bench/results/) with the command, commit and device.
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE=${ENGINE:?set ENGINE to an h200 engine directory of the a3b NVFP4 fuel}
RESULTS=${RESULTS:-bench/results}
BUCKETS=${BUCKETS:-1,16,32}
mkdir -p "$RESULTS"
commit=$(cat "$ENGINE/../COMMIT" 2>/dev/null || cat "${CARRY:-.carry/h200}/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo '?')
{
  echo "## $(date -u +%Y-%m-%dT%H:%MZ) commit $commit"
  echo "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo '?')"
  echo "command: ENGINE=$ENGINE bash bench/h200_controls.sh  (rocket-engine bench --context 512 --steps 32 --reps 5 --buckets $BUCKETS ..., a3b nvfp4 seed 1)"
} >>"$RESULTS/h200-controls.md"
penalties=(--presence-penalty 1.5 --frequency-penalty 0.5 --repetition-penalty 1.1 --logit-bias 40)
sampled=(--temperature 0.7 --top-p 0.8 --top-k 20)
bench() {  # bench ARGS...: one table, printed and appended
  local result
  result=$("$ENGINE/bin/rocket-engine" bench --context 512 --steps 32 --reps 5 --buckets "$BUCKETS" "$@")
  echo "$result"
  { echo "$result"; echo; } >>"$RESULTS/h200-controls.md"
}
bench
bench "${penalties[@]}"
bench --masked
bench "${sampled[@]}"
bench "${sampled[@]}" "${penalties[@]}"
bench "${sampled[@]}" --masked
