#!/usr/bin/env bash
# A fuel in the official releases' layout — multimodal names with a text_config, vision and MTP
# tensors, and (bf16) fused routed experts — forged from the tiny fixture's seed, builds a host engine
# with the same memory map for the text model and a weights.blob whose text part is byte-identical (the
# vision tower follows it: a host plan carries the tower), and passes the same HF parity. The
# block-FP8 and NVFP4 fuels (per-expert, with their modules_to_not_convert / exclude_modules lists)
# likewise condition the fixture's blob; the H200 build refuses block FP8 naming its weight families.
#   layouts.sh ROCKET WORK GOLDEN_DIR
set -euo pipefail
rocket=$1 work=$2/layouts golden=$3
rm -rf "$work"; mkdir -p "$work"

same_plan() {  # the chemistry and the text model's memory map of two plan.json files are the same; the
               # second carries the vision tower after the first's blob
  python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("fingerprint", "chemistry"):
    assert a[k] == b[k], f"plan {k} differs"
tb = {t["name"]: t for t in b["memory_map"]["tensors"]}
for t in a["memory_map"]["tensors"]:
    assert tb.pop(t["name"]) == t, f"tensor {t['name']} differs"
assert tb and all(n.startswith("visual.") and t["offset"] >= a["blob_bytes"] for n, t in tb.items()), sorted(tb)[:3]
assert "vision" not in a and b["vision"]["image_token_id"] == 151655, b.get("vision")
assert b["fuel_layout"] != a["fuel_layout"], (a["fuel_layout"], b["fuel_layout"])
PY
}

for format in bf16 fp8 nvfp4; do
  base=$2/engines/tiny-$format experts=per-expert
  [ "$format" = bf16 ] && experts=fused
  "$rocket" forge --fuel tiny --format "$format" --seed 1 --layout multimodal --expert-layout "$experts" \
    --out "$work/fuel-$format"
  "$rocket" build "$work/fuel-$format" --booster host --out "$work/engine-$format" --golden "$golden/tiny_$format.json"
  cmp -n "$(stat -c %s "$base/weights.blob")" "$base/weights.blob" "$work/engine-$format/weights.blob" \
    || { echo "FAIL $format: the blob's text model differs"; exit 1; }
  same_plan "$base/plan.json" "$work/engine-$format/plan.json"
  python3 - "$work/engine-$format/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
parts = {u["part"] for u in p["unused_tensors"]}
assert parts == {"mtp"} and all(u["tensors"] > 0 and u["bytes"] > 0 for u in p["unused_tensors"]), p["unused_tensors"]
PY
  [ "$format" = bf16 ] || rm -rf "$work/engine-$format"
done

# The same HF parity as the fixture's engine, on the engine built from the fused multimodal fuel: it
# carries the tower, and its text rows run the multimodal rotary at text positions.
"$work/engine-bf16/bin/rocket-engine" parity --golden "$golden/tiny_bf16.json" --tolerance "$(cat "$golden/tiny.tolerance")"
# Images in prefill on it (engine/image_check.cc), and the HF reference's logits of prompts with
# images once tests/golden/image_prompts_tiny.json is committed (it says it skips until then); the
# fixture's text engine refuses images.
"$work/engine-bf16/bin/rocket-engine" imagecheck --golden "$golden/image_prompts_tiny.json" \
  --tolerance "$(cat "$golden/tiny.tolerance")"
"$2/engines/tiny-bf16/bin/rocket-engine" imagecheck

"$rocket" inspect "$work/engine-bf16" | grep -q "unused      4 mtp tensors under 'mtp.'" \
  || { echo "FAIL inspect does not show the unused MTP tensors"; exit 1; }
"$rocket" inspect "$work/engine-bf16" | grep -q "^vision      tower of 2 blocks, hidden 64, 4 heads, 2x2 merge, BF16 in the blob; image token 151655" \
  || { echo "FAIL inspect does not show the vision tower"; exit 1; }

echo "PASS layouts"
