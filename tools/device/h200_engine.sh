#!/usr/bin/env bash
# The one GPU-machine call for the H200 engine: parity with the HF goldens, bit-exact graph replay, and
# the a3b NVFP4 benchmark. Each step is timed and logged; a summary table comes last.
#
#   bash tools/device/h200_engine.sh
#
# Needs the repo tree and .carry/h200/ from `bash tools/device/prepare_h200.sh` (run where nvcc is):
# the static `rocket`, the tokenizer, and each engine's plan, engine.h and compiled binary (built with
# `rocket build --no-weights`). Here it forges the fuels (same seeds and flags as tests/e2e/tiny_engine.sh
# and tools/device/foundation.sh), writes each engine's weights.blob with `rocket build --weights-only`
# (which refuses a fuel whose plan differs from the carried one), and runs the engines:
#   tiny bf16, tiny nvfp4   parity vs tests/golden/tiny_{bf16,nvfp4}.json, replay
#   a3b bf16, 4 layers      parity vs tests/golden/a3b4_bf16.json (HF FP32 on the same fuel)
#   a3b nvfp4               weights load rate, then bench/h200_a3b.sh (contexts 512 and 8192), the
#                           decoding controls' step cost (bench/h200_controls.sh) and their serving
#                           checks (tools/device/serve_controls.py), the agent workload against its
#                           server (bench/serve.sh), with two GPUs or more the replicated arrangement
#                           against one booster (bench/replicated.sh), a short soak (bench/soak.py)
# and, before the engines, the sampler's kernel check (.carry/checks/sample_check, where
# tools/device/build_checks.sh put it: host agreement with penalties, bias and grammar masks).
# The full a3b forge (~7.5 min) runs in the background from the start, beside the small steps.
# Knobs (environment): OUT (./out/h200_engine), FUELS (/tmp/fuels), BUDGET_S (1140), PREFILL_LENGTHS
# (prefill_bench's --lengths), SERVE_FLAGS (more serve_agents.py flags), LAUNCH_FLAGS (more launch flags
# for bench/serve.sh's server), SKIP (step names
# not to run), ONLY (the step names to run, all when empty), CARRY (.carry/h200). Exit status: 0 when
# every required step passed (steps skipped by SKIP/ONLY count as passed).
# Where one call may run at most 10 minutes, split the run in two calls on the same warm machine (the
# fuels stay in FUELS between them):
#   BUDGET_S=570 SKIP="weights_a3b_nvfp4 bench_a3b_nvfp4 serve_a3b_nvfp4" bash tools/device/h200_engine.sh
#   BUDGET_S=570 ONLY="wait_forge_a3b_nvfp4 weights_a3b_nvfp4 bench_a3b_nvfp4 serve_a3b_nvfp4" bash tools/device/h200_engine.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/out/h200_engine}
FUELS=${FUELS:-/tmp/fuels}
CARRY=${CARRY:-$ROOT/.carry/h200}
BUDGET_S=${BUDGET_S:-1140}
export CARRY
SKIP=${SKIP:-}
ONLY=${ONLY:-}
ENGINES=/tmp/h200-engines
GOLDEN=$ROOT/tests/golden
mkdir -p "$OUT" "$FUELS" "$ENGINES"
export LD_LIBRARY_PATH="$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # libgomp (rocket's forge) and libfmt for rocket
# cuBLAS (the token path's projections): the engine's rpath names the toolkit directory of the machine
# that built it; where this machine keeps it elsewhere, PyTorch's wheel has the same major version.
if [[ ! -f /usr/local/cuda/lib64/libcublas.so.13 ]]; then
  cublas=$(python3 -c 'import nvidia.cublas as c, os; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null || true)
  [[ -n $cublas ]] && export LD_LIBRARY_PATH="$cublas:$LD_LIBRARY_PATH"
fi

LOG=$OUT/h200_engine.log
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
TEE_PID=$!

unxz_to() {  # unxz_to FILE.xz DEST: xz where installed, else python's lzma
  if command -v xz >/dev/null; then
    xz -dc "$1" >"$2"
  else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
  fi
}
# The CLI, the tokenizer forge copies into every fuel, and each engine's plan are carried xz-compressed.
ROCKET=/tmp/rocket-cli
unxz_to "$CARRY/rocket.xz" "$ROCKET" && chmod +x "$ROCKET"
TOKENIZER=/tmp/rocket-tokenizer
mkdir -p "$TOKENIZER"
cp "$CARRY/tokenizer/tokenizer_config.json" "$TOKENIZER/"
unxz_to "$CARRY/tokenizer/tokenizer.json.xz" "$TOKENIZER/tokenizer.json"
# Each engine's lib/ (cpp-httplib and its libraries), carried once as a tarball.
ENGINE_LIB=/tmp/rocket-engine-lib
rm -rf "$ENGINE_LIB" && mkdir -p "$ENGINE_LIB"
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$CARRY/engine-lib.tar.xz" "$ENGINE_LIB"
# A weights.blob an earlier call on this machine wrote stays when the carried plan is byte-identical to
# the one it was written for (the weights step below then keeps it unless the fuel was forged since):
# the second call of a split run does not spend minutes rewriting 22 GB.
for e in "$CARRY"/engines/*; do
  name=${e##*/} dst=$ENGINES/${e##*/} kept=""
  unxz_to "$e/plan.json.xz" "/tmp/rocket-plan-$name.json"
  if [[ -f $dst/weights.blob && -f $dst/plan.json ]] && cmp -s "/tmp/rocket-plan-$name.json" "$dst/plan.json"; then
    mv "$dst/weights.blob" "/tmp/rocket-kept-$name.blob" && kept=1
  fi
  rm -rf "$dst" && cp -r "$e" "$ENGINES/" && mv "/tmp/rocket-plan-$name.json" "$dst/plan.json" && rm "$dst/plan.json.xz"
  [[ -n $kept ]] && mv "/tmp/rocket-kept-$name.blob" "$dst/weights.blob"
  if [[ -f $dst/bin/rocket-engine.xz ]]; then  # prepare_h200.sh carries the binaries compressed
    unxz_to "$dst/bin/rocket-engine.xz" "$dst/bin/rocket-engine" && rm "$dst/bin/rocket-engine.xz"
  fi
  cp -r "$ENGINE_LIB" "$dst/lib"
  cp "$TOKENIZER/tokenizer.json" "$dst/"
done
chmod +x "$ENGINES"/*/bin/rocket-engine

T_START=$(date +%s)
DEADLINE=$((T_START + BUDGET_S))
REQUIRED_FAILED=0
SUMMARY=()

wanted() { [[ " $SKIP " != *" $1 "* && ( -z $ONLY || " $ONLY " == *" $1 "* ) ]]; }

# step NAME REQUIRED(0|1) NEED_S COMMAND: COMMAND under a timeout that ends before the budget does;
# skipped when fewer than NEED_S seconds are left. Exit 90 means "prerequisite missing" (SKIP).
step() {
  local name=$1 required=$2 need=$3 cmd=$4
  local now left rc=0 t0 t1 status dt
  now=$(date +%s)
  left=$((DEADLINE - now))
  if ! wanted "$name"; then
    SUMMARY+=("$name|SKIP(asked)|0|$required")
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
  timeout -k 10 $((left - 5 > 1 ? left - 5 : 1)) bash -o pipefail -c "$cmd" || rc=$?
  t1=$(date +%s.%N)
  dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  case $rc in
    0) status=OK ;;
    90) status="SKIP(prerequisite missing)" ;;
    124|137) status=TIMEOUT ;;
    *) status="FAIL(rc=$rc)" ;;
  esac
  echo "=== [$name] $status in ${dt}s"
  SUMMARY+=("$name|$status|$dt|$required")
  if ((required)) && [[ $status != OK ]]; then REQUIRED_FAILED=1; fi
  return 0
}

forge() {  # forge NAME ARGS...: the command that forges $FUELS/NAME
  local name=$1
  shift
  echo "rm -rf '$FUELS/$name' && '$ROCKET' forge $* --tokenizer '$TOKENIZER' --out '$FUELS/$name' && du -sh '$FUELS/$name'"
}
weights() {  # weights NAME: the engine's weights.blob from the fuel (into the copy made above), or the one kept
  local name=$1 blob=$ENGINES/$1/weights.blob
  echo "test -f '$FUELS/$name/config.json' || { echo 'no fuel $name'; exit 90; }; \
    if [[ -f '$blob' && '$blob' -nt '$FUELS/$name/config.json' ]]; then echo 'weights.blob kept: same plan, fuel not forged since'; \
    else '$ROCKET' build '$FUELS/$name' --booster h200 --out '$ENGINES/$name' --weights-only; fi && ls -la '$ENGINES/$name'"
}
engine() {  # engine NAME COMMAND ARGS...
  local name=$1
  shift
  echo "test -f '$ENGINES/$name/weights.blob' || { echo 'no weights for $name'; exit 90; }; '$ENGINES/$name/bin/rocket-engine' $*"
}

echo "Rocket H200 engine run $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), commit $(cat "$CARRY/COMMIT" 2>/dev/null || echo '?')"
step sample_check 0 120 "test -x '$ROOT/.carry/checks/sample_check' || exit 90; '$ROOT/.carry/checks/sample_check' | tee '$OUT/sample_check.log'"
step env 1 0 "nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv; nproc; free -g; \
  df -h /tmp; ls -la '$CARRY' '$CARRY/engines'; ldd '$CARRY'/engines/*/bin/rocket-engine || true"

# Disk: the 8-layer fuels and blobs of an earlier call on this machine (~30 GB) go before the full a3b
# fuel (21 GB) and its blobs are written.
step free_a3b8 0 0 "rm -rf '$FUELS'/a3b8-* '$ENGINES'/a3b8-*; df -h /tmp"

# The full a3b NVFP4 forge, in the background beside everything up to the a3b weights step; its log
# and exit status stay beside the fuels, so a second call (ONLY=...) finds them. It must end inside the
# call that starts it (~330 s on the H100 machine's 16 cores): a call's background processes do not
# outlive it (2026-12-05: one started by a short prefill_ab.sh call was gone at 75%).
A3B_FORGE_LOG=$FUELS/forge_a3b_nvfp4.log
A3B_FORGE_RC=$FUELS/forge_a3b_nvfp4.rc
if wanted forge_a3b_nvfp4; then
  rm -f "$A3B_FORGE_RC"
  echo "=== [forge_a3b_nvfp4] $(date -u +%H:%M:%S) started in the background (log: $A3B_FORGE_LOG)"
  bash -c "$(forge a3b-nvfp4 --fuel a3b --format nvfp4 --seed 1); echo \$? >'$A3B_FORGE_RC'" >"$A3B_FORGE_LOG" 2>&1 &
  echo $! >"$FUELS/forge_a3b_nvfp4.pid"
fi

# The prefill benchmark's fifth of a3b (prepare_h200.sh), forged beside the small steps as well.
if wanted forge_a3b8_nvfp4; then
  rm -f "$FUELS/forge_a3b8_nvfp4.rc"
  bash -c "$(forge a3b8-nvfp4 --fuel a3b --format nvfp4 --seed 1 --layers 8); echo \$? >'$FUELS/forge_a3b8_nvfp4.rc'" \
    >"$FUELS/forge_a3b8_nvfp4.log" 2>&1 &
  echo $! >"$FUELS/forge_a3b8_nvfp4.pid"
fi

# The 8-layer a3b with the releases' vision tower (images, issue 43), forged in the background too.
if wanted forge_a3b8_mm; then
  rm -f "$FUELS/forge_a3b8_mm.rc"
  bash -c "$(forge a3b8-mm --fuel a3b --format nvfp4 --seed 1 --layers 8 --layout multimodal); echo \$? >'$FUELS/forge_a3b8_mm.rc'" \
    >"$FUELS/forge_a3b8_mm.log" 2>&1 &
  echo $! >"$FUELS/forge_a3b8_mm.pid"
fi

# The block-FP8 fuels (`-FP8` releases' form): their 8-layer a3b forged in the background too.
if wanted forge_a3b8_fp8; then
  rm -f "$FUELS/forge_a3b8_fp8.rc"
  bash -c "$(forge a3b8-fp8 --fuel a3b --format fp8 --seed 1 --layers 8); echo \$? >'$FUELS/forge_a3b8_fp8.rc'" \
    >"$FUELS/forge_a3b8_fp8.log" 2>&1 &
  echo $! >"$FUELS/forge_a3b8_fp8.pid"
fi

for fmt in bf16 nvfp4 fp8; do
  step "forge_tiny_$fmt" 1 30 "$(forge "tiny-$fmt" --fuel tiny --format $fmt --seed 1)"
  step "weights_tiny_$fmt" 1 30 "$(weights "tiny-$fmt")"
  full=""
  [[ $fmt == bf16 ]] && full="--full '$GOLDEN/tiny_bf16_last.bin'"
  step "parity_tiny_$fmt" 1 60 "$(engine "tiny-$fmt" parity --golden "'$GOLDEN/tiny_$fmt.json'" $full)"
  step "replay_tiny_$fmt" 1 60 "$(engine "tiny-$fmt" replay)"
  step "prefill_check_tiny_$fmt" 1 60 "$(engine "tiny-$fmt" prefill-check)"
done

# Images on the tiny fuel with its tower: the HF reference's first-token logits of prompts with images
# (tests/golden/image_prompts_tiny.json), and the engine's own image checks (rocket-engine imagecheck).
step forge_tiny_mm 0 30 "$(forge tiny-mm --fuel tiny --format bf16 --layout multimodal --expert-layout fused --seed 1)"
step weights_tiny_mm 0 30 "$(weights tiny-mm)"
step imagecheck_tiny_mm 0 60 "$(engine tiny-mm imagecheck --golden "'$GOLDEN/image_prompts_tiny.json'")"
step parity_tiny_mm 0 60 "$(engine tiny-mm parity --golden "'$GOLDEN/tiny_bf16.json'")"

# The bf16 noise floor: HF itself computing in bf16 against its fp32 goldens, and the engine against
# that bf16 run. A bf16-activation engine cannot be asked to sit closer to the fp32 goldens than HF's
# own bf16 run does (routing flips at near-tied experts make the distance spiky, not smooth).
bf16_floor() {  # bf16_floor NAME GOLDEN
  local name=$1 golden=$2
  step "hf_bf16_$name" 0 150 "python3 '$ROOT/tools/reference/golden.py' --fuel '$FUELS/$name' --tokenizer '$TOKENIZER' \
    --out '$OUT/${name}_hf_bf16.json' --dtype bfloat16 --steps 32 >/dev/null && \
    python3 '$ROOT/tools/reference/compare_goldens.py' '$GOLDEN/$golden' '$OUT/${name}_hf_bf16.json'"
  step "parity_hfbf16_$name" 0 60 "$(engine "$name" parity --golden "'$OUT/${name}_hf_bf16.json'")"
}
bf16_floor tiny-bf16 tiny_bf16.json

# Block FP8 at the a3b shape: 4 layers against HF (the fuel's FP8 weights dequantised exactly, fp32
# math: tools/reference/golden.py --quant manual; tests/golden/a3b4_fp8.json is golden_a3b4_fp8's
# output, committed); 8 layers beside the NVFP4 engine below.
step forge_a3b4_fp8 0 90 "$(forge a3b4-fp8 --fuel a3b --format fp8 --seed 1 --layers 4)"
step golden_a3b4_fp8 0 150 "python3 '$ROOT/tools/reference/golden.py' --fuel '$FUELS/a3b4-fp8' --tokenizer '$TOKENIZER' \
  --out '$OUT/a3b4_fp8.json' --dtype float32 --steps 16 --quant manual >/dev/null && ls -la '$OUT/a3b4_fp8.json'"
step weights_a3b4_fp8 0 120 "$(weights a3b4-fp8)"
step parity_a3b4_fp8 0 120 "$(engine a3b4-fp8 parity --golden "'$GOLDEN/a3b4_fp8.json'")"
step prefill_check_a3b4_fp8 0 120 "$(engine a3b4-fp8 prefill-check)"

step forge_a3b4_bf16 0 90 "$(forge a3b4-bf16 --fuel a3b --format bf16 --seed 1 --layers 4)"
step weights_a3b4_bf16 0 120 "$(weights a3b4-bf16)"
step parity_a3b4_bf16 0 120 "$(engine a3b4-bf16 parity --golden "'$GOLDEN/a3b4_bf16.json'")"
step replay_a3b4_bf16 0 90 "$(engine a3b4-bf16 replay)"
step prefill_check_a3b4_bf16 0 120 "$(engine a3b4-bf16 prefill-check)"
step wait_forge_a3b8_nvfp4 0 60 "test -f '$FUELS/forge_a3b8_nvfp4.pid' || exit 90; \
  while [[ ! -f '$FUELS/forge_a3b8_nvfp4.rc' ]] && kill -0 \$(cat '$FUELS/forge_a3b8_nvfp4.pid') 2>/dev/null; do sleep 3; done; \
  tail -2 '$FUELS/forge_a3b8_nvfp4.log'; test \"\$(cat '$FUELS/forge_a3b8_nvfp4.rc' 2>/dev/null)\" = 0"
step weights_a3b8_nvfp4 0 120 "$(weights a3b8-nvfp4)"
step prefill_check_a3b8_nvfp4 0 120 "$(engine a3b8-nvfp4 prefill-check)"
step prefill_bench_a3b8_nvfp4 0 200 "$(engine a3b8-nvfp4 prefill-bench --lengths 512,2048,4096,8192,32768 --prefix 28672) \
  | tee '$OUT/h200-prefill-a3b8.md'"
# Block FP8 at 8 layers of a3b, and the NVFP4 engine's decode at the same shape beside it (same card,
# same call).
step wait_forge_a3b8_fp8 0 60 "test -f '$FUELS/forge_a3b8_fp8.pid' || exit 90; \
  while [[ ! -f '$FUELS/forge_a3b8_fp8.rc' ]] && kill -0 \$(cat '$FUELS/forge_a3b8_fp8.pid') 2>/dev/null; do sleep 3; done; \
  tail -2 '$FUELS/forge_a3b8_fp8.log'; test \"\$(cat '$FUELS/forge_a3b8_fp8.rc' 2>/dev/null)\" = 0"
step weights_a3b8_fp8 0 120 "$(weights a3b8-fp8)"
step prefill_check_a3b8_fp8 0 120 "$(engine a3b8-fp8 prefill-check)"
step bench_a3b8_fp8 0 120 "$(engine a3b8-fp8 bench --context 512 --steps 32 --reps 3) | tee '$OUT/h200-bench-a3b8-fp8.md'"
step prefill_bench_a3b8_fp8 0 200 "$(engine a3b8-fp8 prefill-bench --lengths 2048,8192) | tee '$OUT/h200-prefill-a3b8-fp8.md'"
step serve_a3b8_fp8 0 150 "test -f '$ENGINES/a3b8-fp8/weights.blob' || exit 90; SERVE_LOG='$OUT/serve_a3b8_fp8.log' \
  bash '$ROOT/bench/serve.sh' '$ENGINES/a3b8-fp8' '$OUT/h200-serve-agents-a3b8-fp8.md' --concurrency 1,16,64 --max-tokens 64"
step soak_a3b8_fp8 0 200 "test -f '$ENGINES/a3b8-fp8/weights.blob' || exit 90; \
  python3 '$ROOT/bench/soak.py' --engine '$ENGINES/a3b8-fp8' --minutes \${SOAK_MINUTES_A3B8:-2} --clients 64 --hangup 0.3 \
  --pool 4 --mismatch-ok --log '$OUT/soak_a3b8_fp8.log' --markdown '$OUT/h200-soak-a3b8-fp8.md'"
# The NVFP4 fuel under the dense FP8 map (prepare_h200.sh a3b8-mixed): its weights are the NVFP4 fuel's,
# converted by the build.
step fuel_a3b8_mixed 0 0 "test -f '$FUELS/a3b8-nvfp4/config.json' || exit 90; ln -sfn '$FUELS/a3b8-nvfp4' '$FUELS/a3b8-mixed'"
step weights_a3b8_mixed 0 120 "$(weights a3b8-mixed)"
step prefill_check_a3b8_mixed 0 120 "$(engine a3b8-mixed prefill-check)"
step bench_a3b8_mixed 0 150 "$(engine a3b8-mixed bench --context 512 --steps 32 --reps 3) | tee '$OUT/h200-bench-a3b8-mixed.md'"
step bench_a3b8_nvfp4 0 150 "$(engine a3b8-nvfp4 bench --context 512 --steps 32 --reps 3) | tee '$OUT/h200-bench-a3b8-nvfp4.md' && \
  $(engine a3b8-nvfp4 prefill-bench --lengths 2048,8192) | tee -a '$OUT/h200-bench-a3b8-nvfp4.md'"
# Serving on the 8-layer engine (required: every call that touches the engine, the scheduler or the
# token path serves under load; issue 38): the agent workload up to 64 clients with forked sessions,
# random 8K prompts beside decoding streams, and a soak at 64 clients with 30% hang-ups. Each fails
# when the server dies, a request errors, a step is refused or a page leaks.
step serve_a3b8_nvfp4 1 150 "test -f '$ENGINES/a3b8-nvfp4/weights.blob' || exit 90; SERVE_LOG='$OUT/serve_a3b8_nvfp4.log' \
  bash '$ROOT/bench/serve.sh' '$ENGINES/a3b8-nvfp4' '$OUT/h200-serve-agents-a3b8.md' --concurrency 1,16,32,64 --max-tokens 64"
step random_a3b8_nvfp4 1 150 "test -f '$ENGINES/a3b8-nvfp4/weights.blob' || exit 90; SERVE_LOG='$OUT/random_a3b8_nvfp4.log' \
  bash '$ROOT/bench/random_serve.sh' '$ENGINES/a3b8-nvfp4' '$OUT/h200-random-a3b8.md' --input-len 8192 --output-len 256 \
  --concurrency 1,16,64"
step soak_a3b8_nvfp4 1 200 "test -f '$ENGINES/a3b8-nvfp4/weights.blob' || exit 90; \
  python3 '$ROOT/bench/soak.py' --engine '$ENGINES/a3b8-nvfp4' --minutes \${SOAK_MINUTES_A3B8:-2} --clients 64 --hangup 0.3 \
  --pool 4 --mismatch-ok --log '$OUT/soak_a3b8.log' --markdown '$OUT/h200-soak-a3b8.md'"
# Images at the a3b shape (8 layers, the releases' tower): the image checks, then images through the
# server (bench/image_serve.sh: sessions resending a 1024² screenshot; the cold / resent / text-only
# TTFT probe) and the text serving benchmarks on the same plan (required where it ran: the engine's
# token path carries the multimodal rotary).
step wait_forge_a3b8_mm 0 60 "test -f '$FUELS/forge_a3b8_mm.pid' || exit 90; \
  while [[ ! -f '$FUELS/forge_a3b8_mm.rc' ]] && kill -0 \$(cat '$FUELS/forge_a3b8_mm.pid') 2>/dev/null; do sleep 3; done; \
  tail -2 '$FUELS/forge_a3b8_mm.log'; test \"\$(cat '$FUELS/forge_a3b8_mm.rc' 2>/dev/null)\" = 0"
step weights_a3b8_mm 0 120 "$(weights a3b8-mm)"
step imagecheck_a3b8_mm 0 120 "$(engine a3b8-mm imagecheck)"
# The carried tokenizer's chat template (Qwen3's) reads text only: the server gets the Qwen3.5-shaped one
# that places images (tests/fixtures/xml_tools, as tests/e2e/images.sh serves).
step image_serve_a3b8_mm 0 200 "test -f '$ENGINES/a3b8-mm/weights.blob' || exit 90; \
  python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c[\"chat_template\"] = open(sys.argv[2]).read(); \
json.dump(c, open(sys.argv[1], \"w\"), ensure_ascii=False)' '$ENGINES/a3b8-mm/tokenizer_config.json' \
  '$ROOT/tests/fixtures/xml_tools/chat_template.jinja' && SERVE_LOG='$OUT/image_serve_a3b8_mm.log' \
  bash '$ROOT/bench/image_serve.sh' '$ENGINES/a3b8-mm' '$OUT/h200-image-serve-a3b8.md'"
step serve_a3b8_mm 0 150 "test -f '$ENGINES/a3b8-mm/weights.blob' || exit 90; SERVE_LOG='$OUT/serve_a3b8_mm.log' \
  bash '$ROOT/bench/serve.sh' '$ENGINES/a3b8-mm' '$OUT/h200-serve-agents-a3b8-mm.md' --concurrency 1,16,32,64 --max-tokens 64"
step random_a3b8_mm 0 150 "test -f '$ENGINES/a3b8-mm/weights.blob' || exit 90; SERVE_LOG='$OUT/random_a3b8_mm.log' \
  bash '$ROOT/bench/random_serve.sh' '$ENGINES/a3b8-mm' '$OUT/h200-random-a3b8-mm.md' --input-len 8192 --output-len 256 \
  --concurrency 1,16,64"
step soak_a3b8_mm 0 200 "test -f '$ENGINES/a3b8-mm/weights.blob' || exit 90; \
  python3 '$ROOT/bench/soak.py' --engine '$ENGINES/a3b8-mm' --minutes \${SOAK_MINUTES_A3B8:-2} --clients 64 --hangup 0.3 \
  --pool 4 --mismatch-ok --log '$OUT/soak_a3b8_mm.log' --markdown '$OUT/h200-soak-a3b8-mm.md'"
bf16_floor a3b4-bf16 a3b4_bf16.json
# Disk: the 4-layer fuel and blob (16 GB) go before the full blob (21 GB) is written.
step free_a3b4 0 0 "rm -rf '$FUELS/a3b4-bf16' '$ENGINES/a3b4-bf16'; df -h /tmp"

step wait_forge_a3b_nvfp4 0 60 "test -f '$A3B_FORGE_LOG' || exit 90; \
  while [[ ! -f '$A3B_FORGE_RC' ]] && kill -0 \$(cat '$FUELS/forge_a3b_nvfp4.pid') 2>/dev/null; do sleep 5; done; \
  tail -3 '$A3B_FORGE_LOG'; cp '$A3B_FORGE_LOG' '$OUT/'; test \"\$(cat '$A3B_FORGE_RC' 2>/dev/null)\" = 0"
step weights_a3b_nvfp4 0 240 "$(weights a3b-nvfp4)"
step prefill_check_a3b_nvfp4 0 60 "$(engine a3b-nvfp4 prefill-check)"
step bench_a3b_nvfp4 0 180 "test -f '$ENGINES/a3b-nvfp4/weights.blob' || exit 90; \
  ENGINE='$ENGINES/a3b-nvfp4' RESULTS='$OUT' bash '$ROOT/bench/h200_a3b.sh'"
# The full a3b under the dense FP8 map the gate passes (prepare_h200.sh a3b-mixed): the NVFP4 fuel's
# weights converted by the build, the decode benchmark beside the NVFP4 engine's (same card). The NVFP4
# blob goes first: the fuel and two blobs (~62 GB) would not fit the machine's disk.
step free_a3b_nvfp4_blob 0 0 "rm -f '$ENGINES/a3b-nvfp4/weights.blob'; df -h /tmp"
# map_steps NAME: the steps of an engine built from the NVFP4 fuel under another precision map
# (fuel_, weights_, prefill_check_, bench_, serve_, soak_NAME with - as _).
map_steps() {
  local name=$1 id=${1//-/_}
  local have="test -f '$ENGINES/$name/weights.blob' || exit 90"
  step "fuel_$id" 0 0 "test -f '$FUELS/a3b-nvfp4/config.json' || exit 90; ln -sfn '$FUELS/a3b-nvfp4' '$FUELS/$name'"
  step "weights_$id" 0 300 "$(weights "$name")"
  step "prefill_check_$id" 0 60 "$(engine "$name" prefill-check)"
  step "bench_$id" 0 120 "$have; ENGINE='$ENGINES/$name' RESULTS='$OUT' bash '$ROOT/bench/h200_a3b.sh'"
  step "serve_$id" 0 150 "$have; SERVE_LOG='$OUT/serve_$id.log' \
    bash '$ROOT/bench/serve.sh' '$ENGINES/$name' '$OUT/h200-serve-agents-$name.md' --concurrency 1,16,32 --max-tokens 64"
  step "soak_$id" 0 200 "$have; \
    python3 '$ROOT/bench/soak.py' --engine '$ENGINES/$name' --minutes \${SOAK_MINUTES_A3B8:-2} --clients 32 --hangup 0.3 \
    --pool 4 --mismatch-ok --log '$OUT/soak_$id.log' --markdown '$OUT/h200-soak-$name.md'"
}
map_steps a3b-mixed
# The same map with an FP8 LM head (prepare_h200.sh a3b-fp8head), after the mixed engine's blob.
step free_a3b_mixed_blob 0 0 "rm -f '$ENGINES/a3b-mixed/weights.blob'; df -h /tmp"
map_steps a3b-fp8head
step controls_a3b_nvfp4 0 200 "test -f '$ENGINES/a3b-nvfp4/weights.blob' || exit 90; \
  ENGINE='$ENGINES/a3b-nvfp4' RESULTS='$OUT' bash '$ROOT/bench/h200_controls.sh'"
step serve_controls_a3b_nvfp4 0 150 "test -f '$ENGINES/a3b-nvfp4/weights.blob' || exit 90; \
  python3 '$ROOT/tools/device/serve_controls.py' --engine '$ENGINES/a3b-nvfp4' --log '$OUT/serve_controls.log' \
  --markdown '$OUT/h200-serve-controls.md'"
step prefill_bench_a3b_nvfp4 0 120 "$(engine a3b-nvfp4 prefill-bench --lengths ${PREFILL_LENGTHS:-512,2048,4096,8192,32768} --prefix 28672) \
  | tee '$OUT/h200-prefill-a3b.md'"
step mixed_bench_a3b_nvfp4 0 60 "$(engine a3b-nvfp4 mixed-bench --decode 16 --lengths 64,128,256,512,1024,1536 --context 1024) \
  | tee '$OUT/h200-mixed-a3b.md'"
step serve_a3b_nvfp4 0 240 "test -f '$ENGINES/a3b-nvfp4/weights.blob' || exit 90; SERVE_LOG='$OUT/serve_a3b_nvfp4.log' \
  bash '$ROOT/bench/serve.sh' '$ENGINES/a3b-nvfp4' '$OUT/h200-serve-agents.md' --max-tokens 64 \${SERVE_FLAGS:-}"
# SGLang's published shape (random 8K prompts, 1K outputs, ignore_eos) at 1, 16, 64 and 100 clients.
step random_a3b_nvfp4 0 420 "test -f '$ENGINES/a3b-nvfp4/weights.blob' || exit 90; SERVE_LOG='$OUT/random_a3b_nvfp4.log' \
  bash '$ROOT/bench/random_serve.sh' '$ENGINES/a3b-nvfp4' '$OUT/h200-random-a3b.md' \${RANDOM_FLAGS:-}"
# The replicated arrangement (issue 27), where the machine has two GPUs or more: one booster against
# `front --replicas N` on the same weights (parity, decode throughput, the agent workload).
step replicated_a3b_nvfp4 0 420 "test -f '$ENGINES/a3b-nvfp4/weights.blob' || exit 90; \
  gpus=\$(nvidia-smi -L | wc -l); [ \$gpus -ge 2 ] || exit 90; \
  bash '$ROOT/bench/replicated.sh' '$ENGINES/a3b-nvfp4' '$OUT/h200x2-boosters.md' \$gpus"
step soak_a3b_nvfp4 0 300 "test -f '$ENGINES/a3b-nvfp4/weights.blob' || exit 90; \
  python3 '$ROOT/bench/soak.py' --engine '$ENGINES/a3b-nvfp4' --minutes \${SOAK_MINUTES:-3} --pool 4 --mismatch-ok \
  --log '$OUT/soak.log' --markdown '$OUT/h200-soak.md'"

echo
echo "=== summary ($(($(date +%s) - T_START))s of ${BUDGET_S}s budget)"
printf '%-22s %-44s %9s  %s\n' step status seconds required
for row in "${SUMMARY[@]}"; do
  IFS='|' read -r n s d r <<<"$row"
  printf '%-22s %-44s %9s  %s\n' "$n" "$s" "$d" "$([[ $r == 1 ]] && echo yes || echo no)"
done
grep -h "^parity [PF]A\|^replay [PF]A\|\[engine\] fuel: \|static fire" "$LOG" | sed 's/^/  /' || true
[[ -f $OUT/h200-a3b.md ]] && cat "$OUT/h200-a3b.md"
[[ -f $OUT/h200-serve-agents.md ]] && cat "$OUT/h200-serve-agents.md"
if ((REQUIRED_FAILED)); then echo "RESULT: a required step failed"; else echo "RESULT: required steps passed"; fi

exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null || true
exit $((REQUIRED_FAILED ? 1 : 0))
