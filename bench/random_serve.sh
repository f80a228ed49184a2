#!/usr/bin/env bash
# The random-prompt benchmark (bench/random_serve.py: SGLang's published shape, random 8K prompts, 1K
# outputs, ignore_eos, concurrency 1/16/64/100) against `rocket-engine launch` of one engine directory;
# appends the table to a results file with the command, commit and machine. Fails when a request fails
# or the server does not survive.
#   bash bench/random_serve.sh ENGINE_DIR RESULTS.md [random_serve.py flags ...]
# LAUNCH_FLAGS: more `rocket-engine launch` flags. Only bash and python3 (the GPU machine has no curl).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
engine=${1:?usage: bash bench/random_serve.sh ENGINE_DIR RESULTS.md [random_serve.py flags]}
out=${2:?usage: bash bench/random_serve.sh ENGINE_DIR RESULTS.md [random_serve.py flags]}
shift 2
[ -x "$engine/bin/rocket-engine" ] || { echo "no engine binary at $engine/bin/rocket-engine"; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=${SERVE_LOG:-/tmp/rocket_random_serve.log}
# shellcheck disable=SC2086
"$engine/bin/rocket-engine" launch --port "$port" --queue 256 ${LAUNCH_FLAGS:-} >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
python3 bench/wait_healthy.py "$port" "$server" || { cat "$log"; exit 1; }
commit=$(cat "${CARRY:-.carry/h200}/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo '?')
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true)
table=$(mktemp)
rc=0
python3 bench/random_serve.py --base "http://127.0.0.1:$port" --markdown "$table" "$@" || rc=$?
if ! kill -0 "$server" 2>/dev/null; then echo "FAIL: the server died"; tail -n 30 "$log"; rc=1; fi
if grep -E "STEP REFUSED|CHECK failed|engine failed" "$log"; then echo "FAIL: the server log above"; rc=1; fi
{
  echo "## Random prompts on $(basename "$engine") ($(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print(p["booster"], "booster,", p["max_streams"], "streams")' "$engine/plan.json")), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "commit $commit; machine: $machine${gpu:+, $gpu}"
  echo "command: ${LAUNCH_FLAGS:+LAUNCH_FLAGS='$LAUNCH_FLAGS' }bash bench/random_serve.sh $engine RESULTS.md $*"
  echo
  cat "$table"
  echo
} >>"$out"
rm -f "$table"
echo "appended to $out"
exit "$rc"
