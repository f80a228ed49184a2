#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan) and runs them, each from its seed corpus under
# tests/fuzz/corpus/NAME for SECONDS (CI: 60 each through ctest -R fuzz). New inputs a run finds go to
# a scratch copy, not the repository; a crash leaves its input in BUILD/crashes/ and fails the run.
#   bash tests/fuzz/run.sh BUILD_DIR [SECONDS] [NAME...]     # BUILD_DIR e.g. build/fuzz
#   bash tests/fuzz/run.sh BUILD_DIR --build-only
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$1 seconds=${2:-60}
shift $(($# < 2 ? $# : 2))
names=("$@")
((${#names[@]})) || names=(openai_request chat_template tokenizer safetensors plan output_parser traceparent grammar request_head image)
cxx=${FUZZ_CXX:-$(command -v clang++-16 || true)}
[[ -n $cxx ]] || { echo "fuzz: no clang++-16 (Debian packages clang-16 libclang-rt-16-dev; clang 14 lacks std::source_location)" >&2; exit 1; }
# One configure and build at a time: ctest runs the harnesses in parallel.
mkdir -p "$build"
(
  flock 9
  [[ -f $build/CMakeCache.txt ]] || cmake -S "$here" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=None >/dev/null
  cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1 || { tail -40 "$build/build.log"; exit 1; }
) 9>"$build/.lock"
[[ $seconds == --build-only ]] && exit 0
mkdir -p "$build/crashes"
for name in "${names[@]}"; do
  work=$(mktemp -d "$build/corpus.$name.XXXX")
  cp -r "$here/corpus/$name/." "$work/" 2>/dev/null || true
  # -rss_limit_mb: a parser that balloons memory on small input is a finding too. -timeout: 30 s, as the
  # first input of openai_request loads the 11 MB Qwen tokenizer, which took over 10 s on a loaded machine.
  "$build/${name}_fuzz" "$work" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=65536 \
    -artifact_prefix="$build/crashes/$name-" -print_final_stats=1 2>"$build/$name.log" \
    || { tail -60 "$build/$name.log"; echo "fuzz $name: FAILED, input in $build/crashes/"; exit 1; }
  grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$build/$name.log" | sed "s/^/fuzz $name: /"
  rm -rf "$work"
done
