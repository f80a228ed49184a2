#!/usr/bin/env bash
# H200 decode benchmark of the full a3b NVFP4 fuel: every bucket at contexts 512 and 8192 greedy, and at
# 512 sampled with Qwen3.5's recommended knobs (temperature 0.7, top-k 20, top-p 0.8); distinct tokens
# per stream, step split by kernel kind, bytes per step, achieved GB/s and the fraction of the
# roofline (src/engine/h200/h200_bench.cu says how each is measured). Runs on the GPU machine as part of
# tools/device/h200_engine.sh, which forges the fuel and writes the engine's weights first:
#   ENGINE=/tmp/h200-engines/a3b-nvfp4 RESULTS=$OUT bash bench/h200_a3b.sh
# ENGINE: an h200 engine of the a3b NVFP4 fuel with weights.blob (its plan's context >= 8192 + steps:
# tools/device/prepare_h200.sh builds it with --max-context 9216). Appends to RESULTS/h200-a3b.md
# (default bench/results/) with the command, commit and device.
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE=${ENGINE:?set ENGINE to an h200 engine directory of the a3b NVFP4 fuel}
RESULTS=${RESULTS:-bench/results}
STEPS=${STEPS:-32}
REPS=${REPS:-5}  # runs of STEPS steps per bucket; the table reports the median run and the min-max
mkdir -p "$RESULTS"
# The commit the engine was built from: prepare_h200.sh records it beside the carried engines (the
# device's copy of the tree has no reliable git history).
commit=$(cat "$ENGINE/../COMMIT" 2>/dev/null || cat "${CARRY:-.carry/h200}/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo '?')
{
  echo "## $(date -u +%Y-%m-%dT%H:%MZ) commit $commit"
  echo "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo '?')"
  echo "command: ENGINE=$ENGINE bash bench/h200_a3b.sh  (rocket-engine bench --context C --steps $STEPS --reps $REPS, engine $(basename "$ENGINE"), a3b seed 1)"
} >>"$RESULTS/h200-a3b.md"
bench() {  # bench ARGS...: one rocket-engine bench table, printed and appended
  local result
  result=$("$ENGINE/bin/rocket-engine" bench --steps "$STEPS" --reps "$REPS" "$@")
  echo "$result"
  { echo "$result"; echo; } >>"$RESULTS/h200-a3b.md"
}
bench --context 512
bench --context 8192
# Sampled decode with Qwen3.5's recommended knobs: what the sampler adds to a step.
bench --context 512 --temperature 0.7 --top-p 0.8 --top-k 20
# The step split per bucket as a picture, where gnuplot is (plot the fetched results otherwise).
if command -v gnuplot >/dev/null; then bash bench/plot.sh "$RESULTS/h200-a3b.md"; fi
