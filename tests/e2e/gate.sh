#!/usr/bin/env bash
# rocket gate on the tiny fuel (random weights, so the figures say nothing of quality: that needs a
# trained fuel, docs/numerics.md): the BF16 engine against itself agrees exactly (two processes,
# the same bytes), and an engine whose experts `build --precision` converted to NVFP4 breaks a
# threshold at the BF16 engine's own level: exit 1 naming it, with the report written, which
# `rocket build --gate` then refuses to build that map by.
#   gate.sh ROCKET WORK
set -euo pipefail
rocket=$1 work=$2
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
text=$src/tests/fixtures/gate_text.txt  # the Brown Corpus's sample ca01 (news), held out of the english fuel
ref=$work/engines/tiny-bf16
"$rocket" gate "$ref" --reference "$ref" --text "$text" --windows 2 --window-tokens 64 --greedy-prompts 2 \
  --greedy-tokens 8 --max-kl-mean 0 --max-kl-p99 0 --min-top1 1 --min-greedy 1
"$rocket" build "$work/fuels/tiny-bf16" --booster host --out "$work/engines/tiny-bf16-nvfp4-experts" \
  --precision experts=nvfp4 --force
set +e
"$rocket" gate "$work/engines/tiny-bf16-nvfp4-experts" --reference "$ref" --text "$text" --windows 2 --window-tokens 64 \
  --greedy-prompts 2 --greedy-tokens 8 --max-kl-mean 0.0001 --out "$work/gate-nvfp4.json" | tee "$work/gate-nvfp4.log"
status=${PIPESTATUS[0]}
set -e
[ "$status" = 1 ] || { echo "gate.sh: NVFP4 experts held to KL 1e-4 exited $status, not 1" >&2; exit 1; }
grep -q 'FAIL KL mean' "$work/gate-nvfp4.log"
python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert r["passed"] is False and r["candidate"]["precision"] == "experts=nvfp4", r
assert r["figures"]["kl_mean"] > 0 and r["figures"]["positions"] == 128, r["figures"]' "$work/gate-nvfp4.json"
# rocket build refuses the map the gate rejected, naming why.
if "$rocket" build "$work/fuels/tiny-bf16" --booster host --out "$work/engines/tiny-gated" --precision experts=nvfp4 \
     --gate "$work/gate-nvfp4.json" --force 2>"$work/gate-build.log"; then
  echo "gate.sh: build took a map the gate rejected" >&2
  exit 1
fi
grep -q 'the gate rejected experts=nvfp4' "$work/gate-build.log"
echo "gate.sh: PASS"
