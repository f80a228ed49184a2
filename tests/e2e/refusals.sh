#!/usr/bin/env bash
# Bad input is refused with a message naming what is wrong, a non-zero exit, and nothing half-written.
#   refusals.sh ROCKET WORK
set -uo pipefail
rocket=$1 work=$2/refusals
rm -rf "$work"; mkdir -p "$work"
fuel=$2/fuels/tiny-bf16 engine=$2/engines/tiny-bf16
failures=0

# expect_refusal NAME PATTERN CMD...: CMD must exit non-zero and print PATTERN on stderr.
expect_refusal() {
  local name=$1 pattern=$2; shift 2
  local out
  if out=$("$@" 2>&1 >/dev/null); then echo "FAIL $name: accepted"; failures=$((failures+1)); return; fi
  if ! grep -q -- "$pattern" <<<"$out"; then echo "FAIL $name: message lacks '$pattern': $out"; failures=$((failures+1)); return; fi
  echo "ok   $name: $(head -c 300 <<<"$out" | tr '\n' ' ')"
}

# A truncated shard.
cp -r "$fuel" "$work/truncated"
shard=$(ls "$work/truncated"/model-00001-*.safetensors)
truncate -s 1000000 "$shard"
expect_refusal truncated-shard "$(basename "$shard")" "$rocket" build "$work/truncated" --booster host --out "$work/out1"
test ! -e "$work/out1" || { echo "FAIL truncated-shard: left $work/out1 behind"; failures=$((failures+1)); }

# An unknown architecture.
cp -r "$fuel" "$work/llama"
sed -i 's/Qwen3_5MoeForCausalLM/LlamaForCausalLM/; s/qwen3_5_moe_text/llama/' "$work/llama/config.json"
expect_refusal unknown-architecture LlamaForCausalLM "$rocket" build "$work/llama" --booster host --out "$work/out2"

# Inconsistent shapes.
cp -r "$fuel" "$work/badshape"
sed -i 's/"num_key_value_heads": 2/"num_key_value_heads": 3/' "$work/badshape/config.json"
expect_refusal inconsistent-config num_key_value_heads "$rocket" build "$work/badshape" --booster host --out "$work/out3"

# A tensor present in a shard but absent from the index (the fuel unit tests cover a tensor missing outright).
cp -r "$fuel" "$work/missing"
python3 - "$work/missing/model.safetensors.index.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p))
del j["weight_map"]["model.layers.2.linear_attn.A_log"]
json.dump(j, open(p, "w"))
PY
expect_refusal unindexed-tensor "layers.2.linear_attn.A_log" "$rocket" build "$work/missing" --booster host --out "$work/out4"

# A chat template using a construct the template engine does not implement: refused at build time.
cp -r "$fuel" "$work/badtemplate"
python3 - "$work/badtemplate/tokenizer_config.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p))
j["chat_template"] = "{% include 'other.jinja' %}" + j["chat_template"]
json.dump(j, open(p, "w"))
PY
expect_refusal unsupported-template "include" "$rocket" build "$work/badtemplate" --booster host --out "$work/out6"

# A plan that does not fit the booster's memory.
python3 - "$work/small.json" <<'PY'
import json, sys
json.dump({"schema": 1, "booster": "host", "device_name": "test", "compute_capability": "", "sm_count": 0,
           "l2_bytes": 0, "smem_per_block_optin": 0, "memory_total": 4 << 30, "memory_free": 2100 << 20,
           "reserve": 0, "floor": 2 << 30, "copy_gbps": 1.0, "cores": 1, "page_size": 4096,
           "driver_version": "", "runtime_version": "", "measured_at": "2026-01-01T00:00:00Z", "host": "test"},
          open(sys.argv[1], "w"))
PY
expect_refusal over-budget "exceeds" "$rocket" build "$fuel" --booster host --out "$work/out5" --profile "$work/small.json"

# A plan from another chemistry handed to this engine.
fp=$("$rocket" forge --fuel tiny --format bf16 --seed 1 --layers 8 --out "$work/deep" --force 2>&1 | grep -o 'chemistry [0-9a-f]*' | cut -d' ' -f2)
python3 - "$engine/plan.json" "$work/deep" "$work/foreign_plan.json" "$fp" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
cfg = json.load(open(sys.argv[2] + "/config.json"))
plan["chemistry"]["num_hidden_layers"] = cfg["num_hidden_layers"]
plan["chemistry"]["layer_types"] = cfg["layer_types"]
plan["fingerprint"] = sys.argv[4]
json.dump(plan, open(sys.argv[3], "w"))
PY
cp -r "$engine" "$work/engine"
cp "$work/foreign_plan.json" "$work/engine/plan.json"
expect_refusal foreign-plan "does not match this engine" "$work/engine/bin/rocket-engine" generate --prompt hi

exit $((failures > 0))
