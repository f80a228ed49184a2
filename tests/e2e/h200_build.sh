#!/usr/bin/env bash
# The H200 engine compiled on a machine without a GPU: forge a fuel's config only (no weights), then
# `rocket build --booster h200 --no-weights`, which generates engine.h and compiles every kernel
# template and engine static_assert for that chemistry with nvcc. A CPU-only change that breaks the
# product binary fails here, not on the next GPU run.
#   h200_build.sh ROCKET WORK NAME FORGE_FLAGS... -- BUILD_FLAGS...
set -euo pipefail
rocket=$1 work=$2 name=$3
shift 3
forge=() build=()
while (($#)) && [[ $1 != -- ]]; do forge+=("$1"); shift; done
(($#)) && shift
build=("$@")
"$rocket" forge "${forge[@]}" --seed 1 --config-only --out "$work/fuels/h200-$name" --force
"$rocket" build "$work/fuels/h200-$name" --booster h200 --no-weights --out "$work/engines/h200-$name" --force "${build[@]}"
test -x "$work/engines/h200-$name/bin/rocket-engine"
grep -q 'constexpr char kBooster\[\] = "h200"' "$work/engines/h200-$name/engine.h"
