#!/usr/bin/env bash
# Sets up, builds and runs every host test (unit tests, tokenizer against the JavaScript reference,
# host-engine parity against the HF goldens, bad-input refusals, the H200 engine compiled for tiny and
# a3b, a minute of libFuzzer on each parser of untrusted input).
set -euo pipefail
cd "$(dirname "$0")/.."
ROCKET_SETUP_TESTS=1 bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
