#!/usr/bin/env bash
# Negative control for the parity test: the same engine with one routed expert's down projection
# zeroed (layer 0, expert 5) must FAIL parity. Proves the comparison can see a real defect.
#   parity_negative.sh WORK GOLDEN_DIR
set -uo pipefail
work=$1 golden=$2
rm -rf "$work/negative" && cp -r "$work/engines/tiny-bf16" "$work/negative"
python3 - "$work/negative" <<'PY'
import json, sys
d = sys.argv[1]
plan = json.load(open(d + "/plan.json"))
t = {x["name"]: x for x in plan["memory_map"]["tensors"]}["layers.0.mlp.experts.5.down_proj.weight"]
with open(d + "/weights.blob", "r+b") as f:
    f.seek(t["offset"]); f.write(b"\0" * t["bytes"])
PY
out=$("$work/negative/bin/rocket-engine" parity --golden "$golden/tiny_bf16.json" --tolerance "$(cat "$golden/tiny.tolerance")" 2>&1)
rc=$?
echo "$out" | tail -2
if [ $rc -eq 0 ]; then echo "FAIL: parity passed on a corrupted engine"; exit 1; fi
grep -q "parity FAIL" <<<"$out" || { echo "FAIL: no parity verdict"; exit 1; }
echo "ok: corrupted engine refused by parity"
