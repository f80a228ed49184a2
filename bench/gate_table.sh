#!/usr/bin/env bash
# The quality gate's table on the trained `english` fuel (docs/numerics.md): for every weight role
# the precision map can change and each of FP8 and NVFP4, a host engine with that one role converted
# (`rocket build --precision ROLE=P`) against the all-BF16 engine, on the fuel's held-out text; then
# the maps that change several roles at once. Prints a markdown table (the figures of `rocket gate`).
#   bash bench/gate_table.sh ROCKET WORK [--windows N ...gate flags]
set -euo pipefail
rocket=$1 work=$2
shift 2
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fuel=$src/fuels/english
mkdir -p "$work"
"$rocket" build "$fuel" --booster host --out "$work/ref" --force >"$work/ref.log" 2>&1
maps=()
for role in lm_head attn_proj gdn_proj gdn_gate router shared_expert shared_expert_gate experts; do
  for p in fp8 nvfp4; do maps+=("$role=$p"); done
done
maps+=("experts=nvfp4,shared_expert=nvfp4" "experts=fp8,shared_expert=fp8,attn_proj=fp8,gdn_proj=fp8,lm_head=fp8"
       "experts=nvfp4,shared_expert=fp8,attn_proj=fp8,gdn_proj=fp8"
       "experts=nvfp4,shared_expert=nvfp4,attn_proj=nvfp4,gdn_proj=nvfp4,lm_head=nvfp4")
echo "| map | KL mean | KL p99 | KL max | top-1 agreement | perplexity (ref → cand) | greedy agreement |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for m in "${maps[@]}"; do
  name=${m//[=,]/_}
  "$rocket" build "$fuel" --booster host --out "$work/$name" --precision "$m" --force >"$work/$name.log" 2>&1
  "$rocket" gate "$work/$name" --reference "$work/ref" --text "$fuel/heldout.txt" --out "$work/$name.json" "$@" \
    >"$work/$name.gate.log" 2>&1 || true
  python3 - "$m" "$work/$name.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[2]))["figures"]
print(f"| `{sys.argv[1]}` | {f['kl_mean']:.5f} | {f['kl_p99']:.4f} | {f['kl_max']:.3f} | {f['top1_agreement']:.4f} | "
      f"{f['perplexity_reference']:.2f} → {f['perplexity_candidate']:.2f} | {f['greedy_agreement']:.3f} |")
PY
  rm -rf "${work:?}/$name"  # the engines are 40 MB each; the report stays
done
