#!/usr/bin/env bash
# The serving-contract load (serving_contract.sh) on a sanitized server: the CLI, the library and the
# engines it compiles built with -fsanitize=SANITIZER (address,undefined or thread) into their own
# build directory. A check that "cannot" fire and fires is what a race or a stray write looks like;
# here AddressSanitizer/UBSan or ThreadSanitizer name it, and any report fails the test.
#
#   sanitized_serving.sh SOURCE_DIR BUILD_DIR WORK SANITIZER
set -euo pipefail
src=$1 build=$2 work=$3 sanitizer=$4
name=sanitized_${sanitizer//,/_}
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DROCKET_CUDA=OFF -DROCKET_SANITIZE="$sanitizer" >/dev/null
cmake --build "$build" --target rocket -j"$(nproc)" 2>&1 | grep -E "error|warning: .*sanitize" || true
test -x "$build/rocket"
# Reports end the process (halt_on_error) and go to the server log, which serving_contract.sh scans;
# leaks are reported at exit too. libgomp is not instrumented: TSan ignores races inside it.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0:suppressions=$src/tests/e2e/tsan.supp
exec "$src/tests/e2e/serving_contract.sh" "$build/rocket" "$work" "$name"
