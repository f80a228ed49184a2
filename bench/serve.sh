#!/usr/bin/env bash
# The agent workload (bench/serve_agents.py) against `rocket-engine launch` of one engine directory, at
# concurrency 1, 4, 16, 32, 64; appends the table to a results file with the command, commit and machine.
#   bash bench/serve.sh ENGINE_DIR RESULTS.md [serve_agents.py flags ...]
# Host engine (the ctest fixture):  bash bench/serve.sh build/e2e/engines/tiny-bf16 bench/results/host-serve-agents.md
# H200 engine: tools/device/h200_engine.sh runs it on the a3b NVFP4 engine (step serve_a3b_nvfp4).
# LAUNCH_FLAGS: more `rocket-engine launch` flags for the server (e.g. --prefill-budget 512).
# SERVE_CMD: the server's command (default `launch`; `front --replicas 2` for the replicated arrangement).
# Only bash and python3: the GPU machine has no curl.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
engine=${1:?usage: bash bench/serve.sh ENGINE_DIR RESULTS.md [serve_agents.py flags]}
out=${2:?usage: bash bench/serve.sh ENGINE_DIR RESULTS.md [serve_agents.py flags]}
shift 2
[ -x "$engine/bin/rocket-engine" ] || { echo "no engine binary at $engine/bin/rocket-engine"; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=${SERVE_LOG:-/tmp/rocket_serve.log}
# shellcheck disable=SC2086
"$engine/bin/rocket-engine" ${SERVE_CMD:-launch} --port "$port" --queue 256 ${LAUNCH_FLAGS:-} >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
python3 bench/wait_healthy.py "$port" "$server" || { cat "$log"; exit 1; }
grep '^\[countdown\]\|countdown' "$log" | head -5 || true
commit=$(cat "$engine/../COMMIT" 2>/dev/null || cat "${CARRY:-.carry/h200}/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo '?')
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true)
table=$(mktemp)
rc=0
python3 bench/serve_agents.py --base "http://127.0.0.1:$port" --concurrency 1,4,16,32,64 --markdown "$table" "$@" || rc=$?
# A run the server did not survive, or that logged a refused step or a failed check, fails however the
# clients fared.
if ! kill -0 "$server" 2>/dev/null; then echo "FAIL: the server died"; tail -n 30 "$log"; rc=1; fi
if grep -E "STEP REFUSED|CHECK failed|engine failed" "$log"; then echo "FAIL: the server log above"; rc=1; fi
{
  echo "## Agent workload on $(basename "$engine")${SERVE_CMD:+ (rocket-engine $SERVE_CMD)} ($(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print(p["booster"])' "$engine/plan.json") booster), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "commit $commit; machine: $machine${gpu:+, $gpu}"
  echo "command: ${SERVE_CMD:+SERVE_CMD='$SERVE_CMD' }${LAUNCH_FLAGS:+LAUNCH_FLAGS='$LAUNCH_FLAGS' }bash bench/serve.sh $engine RESULTS.md $*  (serve_agents.py --concurrency 1,4,16,32,64 unless given;"
  echo "shared ~900-word system prompt + 3 tool definitions; 30% of sessions fork)"
  echo
  cat "$table"
  echo
} >>"$out"
rm -f "$table"
echo "appended to $out"
((rc == 0)) || exit "$rc"
# The pictures, where gnuplot is (the GPU machine has none: plot the fetched results here).
if command -v gnuplot >/dev/null; then bash bench/plot.sh "$out"; fi
