#!/usr/bin/env bash
# Sets up, builds and runs every host test (unit tests, tokenizer against the JavaScript reference,
# host-engine parity against the HF goldens, bad-input refusals).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
