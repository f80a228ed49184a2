#!/usr/bin/env bash
# Host engine vs the HF reference goldens (tests/golden/README.md): teacher-forced logits within the
# stated tolerance at every position, free-running greedy tokens identical where the reference's
# margin exceeds it.
#   parity.sh WORK GOLDEN_DIR
set -euo pipefail
work=$1 golden=$2
"$work/engines/tiny/bin/rocket-engine" parity --golden "$golden/tiny_bf16.json" --full "$golden/tiny_bf16_last.bin" \
  --tolerance "$(cat "$golden/tiny_bf16.tolerance")"
