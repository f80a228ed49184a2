#!/usr/bin/env bash
# The replicated arrangement on host boosters: two tiny bf16 host engines behind `rocket front`
# (routing, cache affinity, failover when a replica dies, drain; replicated.py says what each
# check is).
#   replicated.sh ROCKET WORK
set -euo pipefail
rocket=$1 work=$2/replicated
rm -rf "$work"; mkdir -p "$work"
exec timeout 110 python3 "$(dirname "${BASH_SOURCE[0]}")/replicated.py" "$rocket" "$2/engines/tiny-bf16" "$work"
