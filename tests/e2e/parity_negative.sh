#!/usr/bin/env bash
# Negative controls for the parity test; each corrupted copy of the tiny bf16 engine must FAIL parity:
#   1) one routed expert's down projection zeroed (layer 0, expert 5), at the goldens' tolerance:
#      the logit comparison sees a real defect;
#   2) every routed expert's down projection zeroed, at a tolerance of 1: a band so wide that every
#      logit difference passes and every greedy mismatch is a forgiven near-tie, so only the bound on
#      skipped steps (src/engine/parity.h, max_skipped) can refuse it, and must.
#   parity_negative.sh WORK GOLDEN_DIR
set -uo pipefail
work=$1 golden=$2
failures=0

# corrupt DIR TENSOR...: zeroes each named tensor of the engine copy at DIR.
corrupt() {
  python3 - "$@" <<'PY'
import json, sys
d = sys.argv[1]
tensors = {x["name"]: x for x in json.load(open(d + "/plan.json"))["memory_map"]["tensors"]}
with open(d + "/weights.blob", "r+b") as f:
    for name in sys.argv[2:]:
        t = tensors[name]
        f.seek(t["offset"]); f.write(b"\0" * t["bytes"])
PY
}

# refused NAME DIR TOLERANCE GREP: parity must fail, saying GREP.
refused() {
  local out rc
  out=$("$2/bin/rocket-engine" parity --golden "$golden/tiny_bf16.json" --tolerance "$3" 2>&1)
  rc=$?
  echo "$out" | tail -2
  if [ $rc -ne 0 ] && grep -q "parity FAIL" <<<"$out" && grep -q -- "$4" <<<"$out"; then echo "ok: $1 refused by parity"
  else echo "FAIL: $1: parity exit $rc"; failures=$((failures+1)); fi
}

rm -rf "$work/negative" && cp -r "$work/engines/tiny-bf16" "$work/negative"
corrupt "$work/negative" layers.0.mlp.experts.5.down_proj.weight
refused "one expert zeroed" "$work/negative" "$(cat "$golden/tiny.tolerance")" "FAIL prefill"

rm -rf "$work/negative_wide" && cp -r "$work/engines/tiny-bf16" "$work/negative_wide"
layers=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["chemistry"]["num_hidden_layers"])' "$work/negative_wide/plan.json")
experts=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["chemistry"]["num_experts"])' "$work/negative_wide/plan.json")
names=()
for ((l = 0; l < layers; ++l)); do for ((e = 0; e < experts; ++e)); do names+=("layers.$l.mlp.experts.$e.down_proj.weight"); done; done
corrupt "$work/negative_wide" "${names[@]}"
refused "every expert zeroed, tolerance 1" "$work/negative_wide" 1 "free-running greedy steps differ from the reference within its margin band"

[ "$failures" = 0 ]
