#!/usr/bin/env bash
# The server under the traffic that took the GPU server down (issue 38), on host engines of the tiny
# fuel compiled to the h200 plan's limits: its own numbers (2048-row prefill calls, 64 streams) and the
# same regime in small (64-row calls, 8 streams), where calls of many segments with padded decode rows
# come at once. Against each: the agent workload at 32 and 64 clients with forked sessions, then
# concurrent clients with n > 1 choices, long prompts beside decoding streams and 30% hang-ups. The
# server must stay up, answer every request (or see it cancelled), leak no page or snapshot, run mixed
# steps, and have no engine call refused by the step contract (scheduler/step_contract.h).
#
#   serving_contract.sh ROCKET WORK [NAME]   (NAME: the work folder's name; a sanitized rocket's test
#                                              gives its own, tests/e2e/sanitized_serving.sh)
set -uo pipefail
rocket=$1 work=$2/${3:-serving_contract}
fuel=$2/fuels/tiny-bf16
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$work"; mkdir -p "$work"
test -f "$fuel/config.json" || { echo "FAIL no tiny-bf16 fuel at $fuel (the tiny_bf16 fixture)"; exit 1; }

failures=0
serve() {  # serve NAME BUILD_FLAGS...: build the engine, launch it, run the load, check the server
  local name=$1
  shift
  local engine=$work/$name
  if ! "$rocket" build "$fuel" --booster host --out "$engine" --max-context 4096 --force "$@" >"$work/$name.build.log" 2>&1; then
    echo "FAIL building $name"; tail -n 20 "$work/$name.build.log"; failures=$((failures + 1)); return
  fi
  local port base server log=$work/$name.server.log
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  base=http://127.0.0.1:$port
  "$engine/bin/rocket-engine" launch --host 127.0.0.1 --port "$port" --api-key k --queue 256 >"$log" 2>&1 &
  server=$!
  python3 "$here/../../bench/wait_healthy.py" "$port" "$server" || { echo "FAIL $name never became healthy"; tail -n 20 "$log"; failures=$((failures + 1)); return; }
  local before=$failures
  echo "=== $name: agent workload, 32 and 64 clients, forked sessions"
  python3 "$here/../../bench/serve_agents.py" --base "$base" --api-key k --concurrency 32,64 --sessions-per-stream 1 \
    --turns 2 --max-tokens 12 --system-words 500 --fork-rate 0.3 --markdown "$work/$name.agents.md" >"$work/$name.agents.log" 2>&1 ||
    { echo "FAIL $name: agent workload"; tail -n 5 "$work/$name.agents.log"; failures=$((failures + 1)); }
  echo "=== $name: 64 clients, n > 1, long prompts, hang-ups"
  python3 "$here/serve_load.py" "$base" k --clients 64 --seconds 15 --disconnect 0.3 --fork 0.2 --long 0.15 --burst 200 ||
    { echo "FAIL $name: load"; failures=$((failures + 1)); }
  local stats
  stats=$(curl -s -H 'Authorization: Bearer k' "$base/stats")
  echo "$name /stats: $stats"
  python3 - "$stats" <<'EOF' || failures=$((failures + 1))
import json, sys
s = json.loads(sys.argv[1])
bad = []
if s.get("refused_steps", -1) != 0: bad.append(f"refused_steps {s.get('refused_steps')}")
if s.get("mixed_steps", 0) == 0: bad.append("no mixed step ran: the decode rows + prompt pieces path went untested")
for b in bad: print("FAIL", b)
sys.exit(1 if bad else 0)
EOF
  local alive=1
  kill -0 "$server" 2>/dev/null || { echo "FAIL $name: the server died"; failures=$((failures + 1)); alive=0; }
  # SIGTERM drains and exits 0; a sanitized server reports leaks as it exits, so its log is read after.
  kill "$server" 2>/dev/null
  local status=0
  wait "$server" 2>/dev/null || status=$?
  ((alive == 0 || status == 0)) || { echo "FAIL $name: the server exited $status after SIGTERM"; failures=$((failures + 1)); }
  if grep -E "STEP REFUSED|CHECK failed|engine failed|ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|WARNING: ThreadSanitizer" "$log"; then
    echo "FAIL $name: the server log above"; failures=$((failures + 1))
  fi
  ((failures == before)) || { echo "--- $name server log (tail)"; tail -n 30 "$log"; }
}

serve h200-limits --prefill-chunk 2048 --max-streams 64
serve small-pieces --prefill-chunk 64 --max-streams 8
((failures == 0)) && echo "ok" || echo "FAILED: $failures"
exit "$failures"
