#!/usr/bin/env bash
# A/B of token-path kernel changes on one GPU machine, in one call: each changed kernel's check against
# a build of the same check at the base commit (.carry/checks/NAME and NAME_base, for each NAME in
# CHECKS), then the 8-layer a3b NVFP4 engine's prefill check and benchmark (tools/device/h200_engine.sh
# steps) for the changed engine (.carry/h200/engines/a3b8-nvfp4) and each engine of BASES
# (.carry/h200/engines/NAME: the same plan, `rocket build --no-weights` at an earlier commit; they run
# on the changed engine's weights.blob). The long fuzz runs use the CPU cores meanwhile (RUNS, FUZZ_S;
# empty RUNS: none). Output in $OUT.
#
#   CHECKS="gdn_chunked_check moe_piece_check" BASES="a3b8-base" bash tools/device/prefill_ab.sh
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/out/prefill_ab}
CHECKS=${CHECKS:-gdn_chunked_check}
BASES=${BASES:-a3b8-base}
mkdir -p "$OUT"
RUNS=${RUNS-plan:6 grammar:6}  # empty: no fuzzing
if [[ -n $RUNS ]]; then
  (RUNS=$RUNS SEED0=${SEED0:-700} OUT=/tmp/fuzz-out timeout $((${FUZZ_S:-240} + 60)) \
    bash tools/device/fuzz_long.sh run "${FUZZ_S:-240}" >"$OUT/fuzz.log" 2>&1) &
fi
FUZZ=${!:-}
for check in $CHECKS; do
  for v in base ""; do
    bin=.carry/checks/$check${v:+_$v}
    echo "=== $bin"
    "$bin" >"$OUT/$check${v:+_$v}.txt" 2>&1
    echo "rc $?"
    grep -E "FAIL|median|time a3b|check (PASS|FAIL)" "$OUT/$check${v:+_$v}.txt"
  done
done
ONLY="env forge_a3b8_nvfp4 wait_forge_a3b8_nvfp4 weights_a3b8_nvfp4 prefill_check_a3b8_nvfp4 prefill_bench_a3b8_nvfp4" \
  BUDGET_S=${BUDGET_S:-300} OUT="$OUT/engine" bash tools/device/h200_engine.sh >"$OUT/engine.log" 2>&1
grep -E "^=== \[|^\| [0-9]|peak|PASS|FAIL|worst" "$OUT/engine.log" | cut -c1-200
for name in a3b8-nvfp4 $BASES; do
  engine=/tmp/h200-engines/$name
  [[ -f /tmp/h200-engines/a3b8-nvfp4/weights.blob && -d $engine ]] || continue
  echo "=== engine $name"
  if [[ $name != a3b8-nvfp4 ]]; then  # the changed engine's check and benchmark are in engine.log
    ln -f /tmp/h200-engines/a3b8-nvfp4/weights.blob "$engine/weights.blob"
    "$engine/bin/rocket-engine" prefill-check 2>&1 | tail -3 | cut -c1-200
    "$engine/bin/rocket-engine" prefill-bench --lengths 512,2048,4096,8192,32768 --prefix 28672 2>&1 |
      tee "$OUT/prefill_$name.md" | grep -E "^\| [0-9]|peak"
  fi
  "$engine/bin/rocket-engine" mixed-bench --decode 16 --lengths 64,256,1024 --context 1024 2>&1 | tee "$OUT/mixed_$name.md" |
    grep -E "^\| [0-9]|decode step"
done
[[ -n $FUZZ ]] && wait "$FUZZ" 2>/dev/null
tail -5 "$OUT/fuzz.log" 2>/dev/null
