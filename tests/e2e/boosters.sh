#!/usr/bin/env bash
# Issue 27 on host boosters: the co-activation profile, expert order and split placement from it, and
# the rocket's boosters in the plan, launch and the front's handshake (boosters.py says each check).
#   boosters.sh ROCKET WORK TESTS_DIR
set -euo pipefail
rocket=$1 work=$2 tests=$3
rm -rf "$work/boosters"
exec timeout 1400 python3 "$(dirname "${BASH_SOURCE[0]}")/boosters.py" "$rocket" "$work" "$tests"
