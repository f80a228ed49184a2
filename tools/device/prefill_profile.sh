#!/usr/bin/env bash
# Where a prefill piece's GDN and MoE time goes, kernel by kernel, on the H200 machine: the token path's
# kernel checks (.carry/checks from tools/device/build_checks.sh: correctness first, then their timings
# with each phase apart), then ncu's counters for each kernel of one a3b 2048-token piece (which launch
# that is follows the checks' case order: the a3b cases before n = 2048 come first). Output in $OUT.
#
#   bash tools/device/prefill_profile.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-out/prefill_profile}
mkdir -p "$OUT"
status=0
.carry/checks/gdn_chunked_check | tee "$OUT/gdn_chunked_check.txt" || status=1
.carry/checks/moe_piece_check | tee "$OUT/moe_piece_check.txt" || status=1
[[ ${PROFILE:-1} == 1 ]] || exit $status
summary='^  [a-z].*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Issued Warp Per Scheduler|Eligible Warps|Warp Cycles Per Issued|Registers Per Thread|Achieved Occupancy|Stall|L1/TEX Hit|L2 Hit'
# gdn: a3b cases n = 1, 31, 64, 100 at pos0 0 and 37 come first (8 cases, 3 kernels each), then n = 2048 at 0.
ncu --clock-control none --kernel-name-base demangled -k 'regex:gdn_chunk_(prepare|scan|norm)_kernel<.*\(int\)128, \(int\)128>' \
  --launch-skip 24 --launch-count 3 --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis .carry/checks/gdn_chunked_check >"$OUT/ncu_gdn.txt" 2>&1
grep -E "$summary" "$OUT/ncu_gdn.txt"
# moe: the NVFP4 pieces are tiny's 4 + its skewed case, then a3b n = 1, 100, 777, 2048 (gate_up and down each).
ncu --clock-control none --kernel-name-base demangled -k 'regex:moe_piece_(gate_up|down)_kernel<.*\(rocket::Precision\)2>' \
  --launch-skip 16 --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section InstructionStats .carry/checks/moe_piece_check >"$OUT/ncu_moe.txt" 2>&1
grep -E "$summary" "$OUT/ncu_moe.txt"
exit $status
