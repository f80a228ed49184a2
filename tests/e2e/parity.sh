#!/usr/bin/env bash
# Host engine vs the HF reference goldens (tests/golden/README.md): teacher-forced logits within the
# stated tolerance at every position, free-running greedy tokens identical where the reference's
# margin exceeds it.
#   parity.sh WORK GOLDEN_DIR FORMAT
set -euo pipefail
work=$1 golden=$2 format=$3
full=()
[ -f "$golden/tiny_${format}_last.bin" ] && full=(--full "$golden/tiny_${format}_last.bin")
"$work/engines/tiny-$format/bin/rocket-engine" parity --golden "$golden/tiny_$format.json" "${full[@]}" \
  --tolerance "$(cat "$golden/tiny.tolerance")"
