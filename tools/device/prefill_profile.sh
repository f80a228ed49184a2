#!/usr/bin/env bash
# Where a prefill piece's GDN and MoE time goes, kernel by kernel, on the H200 machine: the token path's
# kernel checks (.carry/checks from tools/device/build_checks.sh: correctness first, then their timings
# with each phase apart), then ncu's counters for each kernel of one a3b 2048-token piece (which launch
# that is follows the checks' case order: the a3b cases before n = 2048 come first). Output in $OUT:
# the checks' logs, ncu.txt (the summary lines) and ncu_full.txt (every section, the stall reasons and
# the hottest source lines included).
#
#   bash tools/device/prefill_profile.sh            (CHECKS=0: ncu only)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-out/prefill_profile}
mkdir -p "$OUT"
status=0
if [[ ${CHECKS:-1} == 1 ]]; then
  .carry/checks/gdn_chunked_check | tee "$OUT/gdn_chunked_check.txt" || status=1
  .carry/checks/moe_piece_check | tee "$OUT/moe_piece_check.txt" || status=1
fi
profile() {  # profile CHECK REGEX SKIP COUNT
  ncu --clock-control none --kernel-name-base demangled -k "regex:$2" --launch-skip "$3" --launch-count "$4" --set full \
    --metrics 'regex:^smsp__(average_warps_issue_stalled_.*_per_issue_active\.ratio|inst_executed\.sum|inst_executed_pipe_tensor.*\.sum)$' --import-source no --page details --print-details all ".carry/checks/$1" 2>&1
}
{
  # gdn: a3b cases n = 1, 31, 64, 100 at pos0 0 and 37 come first (8 cases, 3 kernels each), then n = 2048 at 0.
  profile gdn_chunked_check 'gdn_chunk_(prepare|scan|norm)_kernel<.*GdnShape<\(int\)16, ' 24 3
  # moe: the NVFP4 pieces are tiny's 4 + its skewed case, then a3b n = 1, 100, 777, 2048 (gate_up and down each).
  profile moe_piece_check 'moe_piece_(gate_up|down)_kernel<.*\(rocket::Precision\)2>' 16 2
} >"$OUT/ncu_full.txt"
grep -E '^  [a-z].*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Issued Warp Per Scheduler|Eligible Warps|Warp Cycles Per Issued|Registers Per Thread|Achieved Occupancy|Executed Instructions  |L2 Hit|Stall [A-Z]|stalled|inst_executed' \
  "$OUT/ncu_full.txt" | tee "$OUT/ncu.txt"
exit $status
