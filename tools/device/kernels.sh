#!/usr/bin/env bash
# One GPU-machine call for the H200 kernel checks: runs every prebuilt check under .carry/checks/
# (tools/device/build_checks.sh builds them here), each with a time limit, logging its full output to
# $OUT/NAME.log, and prints a pass/fail table last. Exit 1 when any check failed.
#
#   bash tools/device/kernels.sh [NAME ...]      # default: every .carry/checks/*_check
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-out/kernels}
LIMIT_S=${LIMIT_S:-150}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv,noheader >"$OUT/device.txt" 2>&1
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in .carry/checks/*_check; do names+=("$(basename "$f")"); done
fi
declare -A status seconds
failed=0
for name in "${names[@]}"; do
  t0=$(date +%s%N)
  timeout "$LIMIT_S" ".carry/checks/$name" >"$OUT/$name.log" 2>&1
  rc=$?
  tenths=$(( ($(date +%s%N) - t0) / 100000000 ))
  seconds[$name]=$((tenths / 10)).$((tenths % 10))
  if [ $rc -eq 0 ]; then status[$name]=pass; else status[$name]="FAIL rc=$rc"; failed=1; fi
  echo "===== $name (${status[$name]}, ${seconds[$name]} s) ====="
  tail -n 40 "$OUT/$name.log"
done
echo
echo "| check | result | seconds |"
echo "| --- | --- | --- |"
for name in "${names[@]}"; do echo "| $name | ${status[$name]} | ${seconds[$name]} |"; done
cat "$OUT/device.txt"
exit $failed
