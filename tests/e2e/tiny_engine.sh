#!/usr/bin/env bash
# Fixture: forge the tiny fuel in FORMAT and build its host engine under WORK, with the static-fire
# token taken from the format's HF golden vectors.
#   tiny_engine.sh ROCKET WORK FORMAT
set -euo pipefail
rocket=$1 work=$2 format=$3
mkdir -p "$work"
"$rocket" forge --fuel tiny --format "$format" --seed 1 --out "$work/fuels/tiny-$format" --force
golden=$(cd "$(dirname "${BASH_SOURCE[0]}")/../golden" && pwd)/tiny_$format.json
"$rocket" build "$work/fuels/tiny-$format" --booster host --out "$work/engines/tiny-$format" --golden "$golden" --force
test -x "$work/engines/tiny-$format/bin/rocket-engine"
