#!/usr/bin/env bash
# The main job on the embedded default fuel: forge the tiny fuel, build its host engine, generate.
#   bash scripts/run.sh ["prompt text"]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
prompt=${1:-"The quick brown fox"}
mkdir -p out
[ -d out/fuels/tiny-bf16 ] || build/rocket forge --fuel tiny --format bf16 --seed 1 --out out/fuels/tiny-bf16
[ -x out/engines/tiny/bin/rocket-engine ] || build/rocket build out/fuels/tiny-bf16 --booster host --out out/engines/tiny
build/rocket inspect out/engines/tiny | head -12
build/rocket generate out/engines/tiny --prompt "$prompt" --max-tokens 32
