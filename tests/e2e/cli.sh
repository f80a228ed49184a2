#!/usr/bin/env bash
# Every command line is parsed the same way (src/core/cli.h): each command of `rocket` and of a host
# engine's rocket-engine answers --help with exit 0, and a misspelt flag, a malformed number or one
# out of range is refused with exit 2 and a message naming it, before anything runs.
#   cli.sh ROCKET WORK
set -uo pipefail
rocket=$1 work=$2
fuel=$work/fuels/tiny-bf16 engine=$work/engines/tiny-bf16
failures=0

expect_help() {
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -q -- "--help" <<<"$out"; then echo "ok   help: $*"
  else echo "FAIL help: $* exit $rc: $(head -c 300 <<<"$out")"; failures=$((failures+1)); fi
}

# expect_usage_error PATTERN CMD...: CMD exits 2 and says PATTERN.
expect_usage_error() {
  local pattern=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$pattern" <<<"$out"; then echo "ok   refused: $* ($(head -n 1 <<<"$out"))"
  else echo "FAIL $*: exit $rc, expected 2 and '$pattern': $(head -c 300 <<<"$out")"; failures=$((failures+1)); fi
}

for cmd in forge build inspect generate launch serve probe; do expect_help "$rocket" "$cmd" --help; done
for cmd in generate parity bench buckets cachecheck launch serve; do expect_help "$engine/bin/rocket-engine" "$cmd" --help; done

expect_usage_error "unknown arguments*: --max-contxt" "$rocket" build "$fuel" --booster host --out "$work/cli-out" --max-contxt 64
test ! -e "$work/cli-out" || { echo "FAIL a refused build left $work/cli-out behind"; failures=$((failures+1)); }
expect_usage_error "unknown arguments*: --sed" "$rocket" forge --fuel tiny --sed 3 --out "$work/cli-fuel"
expect_usage_error "tpu not in" "$rocket" build "$fuel" --booster tpu --out "$work/cli-out"
expect_usage_error "unknown arguments*: --prot" "$rocket" launch "$engine" --prot 8080
expect_usage_error "abc is not a number" "$rocket" generate "$engine" --prompt hi --max-tokens abc
expect_usage_error "unknown arguments*: --bogus" "$rocket" probe --booster host --bogus
expect_usage_error "unknown command" "$rocket" frobnicate

expect_usage_error "unknown arguments*: --tolernce" "$engine/bin/rocket-engine" parity --golden "$(dirname "$0")/../golden/tiny_bf16.json" --tolernce 1e-3
expect_usage_error "2 is not in \[0, 1\]" "$engine/bin/rocket-engine" generate --prompt hi --top-p 2
expect_usage_error "0 is not >= 1" "$engine/bin/rocket-engine" bench --tokens 0
expect_usage_error "70000 is not in \[1, 65535\]" "$engine/bin/rocket-engine" launch --port 70000
expect_usage_error "not a byte count" "$engine/bin/rocket-engine" launch --reserve 12X
expect_usage_error "0 is not in \[1, 1024\]" "$engine/bin/rocket-engine" launch --max-json-depth 0
expect_usage_error "unknown argument: extra" "$engine/bin/rocket-engine" cachecheck extra
expect_usage_error "unknown command" "$engine/bin/rocket-engine" frobnicate

if [ $failures -ne 0 ]; then echo "$failures command-line check(s) failed"; exit 1; fi
echo "every command answers --help and refuses bad flags"
