#!/usr/bin/env bash
# Host-booster decode benchmark on the tiny fuel: every bucket, distinct tokens per stream, and the
# fraction of the roofline (bytes per step over this machine's measured copy bandwidth). Appends the
# result, with its command, commit and machine, to bench/results/host-tiny.md.
#   bash bench/host_tiny.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-out}
rocket=build/rocket
[ -d "$work/fuels/tiny-bf16" ] || $rocket forge --fuel tiny --format bf16 --seed 1 --out "$work/fuels/tiny-bf16"
[ -x "$work/engines/tiny-bf16/bin/rocket-engine" ] || $rocket build "$work/fuels/tiny-bf16" --booster host --out "$work/engines/tiny-bf16"
result=$("$work/engines/tiny-bf16/bin/rocket-engine" bench --tokens 16 --context 64)
echo "$result"
{
  echo "## $(date -u +%Y-%m-%dT%H:%MZ) commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty')"
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) threads; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: bash bench/host_tiny.sh  (rocket-engine bench --tokens 16 --context 64, tiny bf16 seed 1)"
  echo '```'
  echo "$result"
  echo '```'
  echo
} >> bench/results/host-tiny.md
