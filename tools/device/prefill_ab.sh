#!/usr/bin/env bash
# A/B of a token-path kernel change on one GPU machine, in one call: the changed kernel's check against
# a build of the same check at the base commit (.carry/checks/NAME and NAME_base), then the 8-layer a3b
# NVFP4 engine's prefill check and benchmark (tools/device/h200_engine.sh steps) for the changed engine
# (.carry/h200/engines/a3b8-nvfp4) and the base one (.carry/h200/engines/a3b8-base: the same plan,
# `rocket build --no-weights` at the base commit; it runs on the changed engine's weights.blob). The
# long fuzz runs use the CPU cores meanwhile (RUNS, FUZZ_S). Output in $OUT.
#
#   CHECK=gdn_chunked_check bash tools/device/prefill_ab.sh
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/out/prefill_ab}
CHECK=${CHECK:-gdn_chunked_check}
mkdir -p "$OUT"
RUNS=${RUNS-plan:6 grammar:6}  # empty: no fuzzing
if [[ -n $RUNS ]]; then
  (RUNS=$RUNS SEED0=${SEED0:-700} OUT=/tmp/fuzz-out timeout $((${FUZZ_S:-240} + 60)) \
    bash tools/device/fuzz_long.sh run "${FUZZ_S:-240}" >"$OUT/fuzz.log" 2>&1) &
fi
FUZZ=${!:-}
for v in base ""; do
  bin=.carry/checks/$CHECK${v:+_$v}
  echo "=== $bin"
  "$bin" >"$OUT/$CHECK${v:+_$v}.txt" 2>&1
  echo "rc $?"
  grep -E "FAIL|median|time a3b|check (PASS|FAIL)" "$OUT/$CHECK${v:+_$v}.txt"
done
ONLY="env forge_a3b8_nvfp4 wait_forge_a3b8_nvfp4 weights_a3b8_nvfp4 prefill_check_a3b8_nvfp4 prefill_bench_a3b8_nvfp4" \
  BUDGET_S=${BUDGET_S:-300} OUT="$OUT/engine" bash tools/device/h200_engine.sh >"$OUT/engine.log" 2>&1
grep -E "^=== \[|^\| [0-9]|peak|PASS|FAIL|worst" "$OUT/engine.log" | cut -c1-200
base=/tmp/h200-engines/a3b8-base
if [[ -f /tmp/h200-engines/a3b8-nvfp4/weights.blob ]]; then
  ln -f /tmp/h200-engines/a3b8-nvfp4/weights.blob "$base/weights.blob"
  echo "=== base engine"
  "$base/bin/rocket-engine" prefill-check 2>&1 | tail -3 | cut -c1-200
  "$base/bin/rocket-engine" prefill-bench --lengths 512,2048,4096,8192,32768 --prefix 28672 2>&1 | tee "$OUT/prefill_base.md" |
    grep -E "^\| [0-9]|peak"
fi
[[ -n $FUZZ ]] && wait "$FUZZ" 2>/dev/null
tail -5 "$OUT/fuzz.log" 2>/dev/null
