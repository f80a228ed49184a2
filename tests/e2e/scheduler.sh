#!/usr/bin/env bash
# The scheduler and prefix cache through the real server on the tiny bf16 host engine:
#  1. 64 concurrent streaming clients with random disconnects for a bounded time: every request
#     completes or is cancelled, the scheduler goes idle, no page or snapshot leaks (serve_load.py);
#  2. the agent workload driver at small scale (bench/serve_agents.py): no errors, and a prefix-cache
#     hit rate well above zero on its shared system prompt and growing histories;
#  3. branch points (branch_cache.py): conversations that share only a system prompt resume from it
#     once a second one has diverged there.
#   scheduler.sh ROCKET WORK
set -uo pipefail
rocket=$1 work=$2/scheduler
engine=$2/engines/tiny-bf16 key=sekrit
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$work"; mkdir -p "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port

"$rocket" launch "$engine" --host 127.0.0.1 --port "$port" --api-key "$key" --queue 64 >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 1 600); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] && break
  kill -0 $server 2>/dev/null || { echo "FAIL server exited:"; cat "$work/server.log"; exit 1; }
  sleep 0.1
done

failures=0
python3 "$here/serve_load.py" "$base" "$key" --clients 64 --seconds 20 || failures=$((failures+1))
python3 "$here/../../bench/serve_agents.py" --base "$base" --api-key "$key" --concurrency 1,4 \
  --sessions-per-stream 2 --turns 2 --max-tokens 8 --system-words 600 --min-hit-rate 0.3 \
  --markdown "$work/agents.md" || failures=$((failures+1))
python3 "$here/branch_cache.py" "$base" "$key" || failures=$((failures+1))
kill -0 $server 2>/dev/null || { echo "FAIL the server died"; failures=$((failures+1)); }
if [ $failures -ne 0 ]; then echo "--- server log (tail)"; tail -n 40 "$work/server.log"; fi
exit $failures
