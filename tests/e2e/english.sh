#!/usr/bin/env bash
# The trained `english` fuel (fuels/english) on the host booster:
#   1. its BF16 engine against the HF goldens made from it (tests/golden/english_bf16.json);
#   2. its FP8 and NVFP4 forms (rocket forge --from) through the quality gate against that engine,
#      on the held-out text the training never read, at the thresholds of docs/numerics.md;
#   3. a gate that must fail: the NVFP4 engine held to the BF16 noise floor.
#   english.sh ROCKET WORK
set -euo pipefail
rocket=$1 work=$2
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fuel=$src/fuels/english golden=$src/tests/golden
mkdir -p "$work/fuels" "$work/engines"

"$rocket" build "$fuel" --booster host --out "$work/engines/english-bf16" --golden "$golden/english_bf16.json" --force
"$work/engines/english-bf16/bin/rocket-engine" parity --golden "$golden/english_bf16.json" \
  --full "$golden/english_bf16_last.bin" --tolerance "$(cat "$golden/tiny.tolerance")"

# Thresholds: docs/numerics.md says where each comes from.
declare -A gate_args=(
  [fp8]="--max-kl-mean 0.01 --max-kl-p99 0.05 --min-top1 0.95 --min-greedy 0.5"
  [nvfp4]="--max-kl-mean 0.05 --max-kl-p99 0.25 --min-top1 0.85 --min-greedy 0.3")
for format in fp8 nvfp4; do
  "$rocket" forge --from "$fuel" --format "$format" --out "$work/fuels/english-$format" --force
  "$rocket" build "$work/fuels/english-$format" --booster host --out "$work/engines/english-$format" --force
  # shellcheck disable=SC2086
  "$rocket" gate "$work/engines/english-$format" --reference "$work/engines/english-bf16" \
    --text "$fuel/heldout.txt" --out "$work/gate-english-$format.json" ${gate_args[$format]}
done

# The gate can fail: NVFP4 is far coarser than the BF16 noise floor.
if "$rocket" gate "$work/engines/english-nvfp4" --reference "$work/engines/english-bf16" --text "$fuel/heldout.txt" \
     --windows 4 --greedy-prompts 4 --max-kl-mean 0.0001; then
  echo "english.sh: the NVFP4 engine passed a gate at the BF16 noise floor; the gate cannot fail" >&2
  exit 1
fi
echo "english.sh: PASS"
