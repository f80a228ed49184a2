#!/usr/bin/env bash
# The agent workload (bench/serve_agents.py) against `rocket-engine launch` of one engine directory, at
# concurrency 1, 4, 16, 32, 64; appends the table to a results file with the command, commit and machine.
#   bash bench/serve.sh ENGINE_DIR RESULTS.md [serve_agents.py flags ...]
# Host engine (the ctest fixture):  bash bench/serve.sh build/e2e/engines/tiny-bf16 bench/results/host-serve-agents.md
# H200 engine: tools/device/h200_engine.sh runs it on the a3b NVFP4 engine (step serve_a3b_nvfp4).
# LAUNCH_FLAGS: more `rocket-engine launch` flags for the server (e.g. --prefill-budget 512).
# SERVE_CMD: the server's command (default `launch`; `front --replicas 2` for the replicated arrangement).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
engine=${1:?usage: bash bench/serve.sh ENGINE_DIR RESULTS.md [serve_agents.py flags]}
out=${2:?usage: bash bench/serve.sh ENGINE_DIR RESULTS.md [serve_agents.py flags]}
shift 2
log=${SERVE_LOG:-/tmp/rocket_serve.log}
source bench/launched_server.sh
table=$(mktemp)
rc=0
python3 bench/serve_agents.py --base "http://127.0.0.1:$port" --concurrency 1,4,16,32,64 --markdown "$table" "$@" || rc=$?
# A run the server did not survive fails however the clients fared.
server_survived || rc=1
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
