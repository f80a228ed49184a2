#!/usr/bin/env bash
# Hardware counters for one kernel of a prebuilt GPU check, on the H200 machine (ncu reads them there;
# METHOD.md: leave the clocks alone). Profiles the first LAUNCHES launches whose demangled name matches
# REGEX — template arguments print as `(int)N` and `(rocket::Precision)N` (0 bf16, 2 nvfp4) — writes the
# full report to $OUT/ncu_CHECK.txt and prints the lines that say whether a kernel is bound by DRAM,
# by issue or by latency.
#
#   bash tools/device/profile.sh moe_check 'moe_gate_up_kernel<.*\(int\)2048.*, \(int\)32, \(rocket::Precision\)2>' [2]
#   bash tools/device/profile.sh gdn_check 'gdn_kernel<.*\(int\)128, \(int\)128>, \(int\)1>'
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
check=${1:?usage: profile.sh CHECK REGEX [LAUNCHES]}
regex=${2:?usage: profile.sh CHECK REGEX [LAUNCHES]}
launches=${3:-1}
OUT=${OUT:-out/profile}
mkdir -p "$OUT"
report=$OUT/ncu_$check.txt
ncu --clock-control none --kernel-name-base demangled -k "regex:$regex" --launch-count "$launches" \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section InstructionStats --section LaunchStats ".carry/checks/$check" >"$report" 2>&1
grep -E "^  [a-z].*\(|Duration|DRAM Throughput|Issued Warp Per Scheduler|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Registers Per Thread|Achieved Occupancy|Theoretical Occupancy" "$report"
