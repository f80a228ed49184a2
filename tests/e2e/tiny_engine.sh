#!/usr/bin/env bash
# Fixture: forge the tiny fuel and build its host engine under WORK (reused by the other e2e tests).
#   tiny_engine.sh ROCKET WORK
set -euo pipefail
rocket=$1 work=$2
mkdir -p "$work"
"$rocket" forge --fuel tiny --format bf16 --seed 1 --out "$work/fuels/tiny-bf16" --force
"$rocket" build "$work/fuels/tiny-bf16" --booster host --out "$work/engines/tiny" --force
test -x "$work/engines/tiny/bin/rocket-engine"
