#!/usr/bin/env bash
# The agent workload (bench/serve_agents.py) against `rocket launch` on the tiny BF16 host engine, at
# concurrency 1, 4, 16, 32, 64; writes bench/results/host-serve-agents.md with the command, commit and
# machine.
#   bash bench/host_serve.sh [BUILD_DIR]     # BUILD_DIR holds rocket and e2e/engines/tiny-bf16 (ctest fixture)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
engine=$build/e2e/engines/tiny-bf16
[ -x "$engine/bin/rocket-engine" ] || { echo "no $engine: run ctest -R e2e.tiny_engine_bf16 in $build first"; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$build/rocket" launch "$engine" --port "$port" --queue 128 >/tmp/host_serve.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.2; done
out=bench/results/host-serve-agents.md
{
  echo "# Agent workload on the host engine (tiny BF16), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "commit $(git rev-parse --short HEAD); machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "command: bash bench/host_serve.sh $build  (serve_agents.py --concurrency 1,4,16,32,64 --sessions-per-stream 2"
  echo "--turns 3 --max-tokens 16; shared ~900-word system prompt + 3 tool definitions; 30% of sessions fork)"
  echo
} >"$out"
python3 bench/serve_agents.py --base "http://127.0.0.1:$port" --concurrency 1,4,16,32,64 --sessions-per-stream 2 \
  --turns 3 --max-tokens 16 --markdown /tmp/host_serve_table.md
cat /tmp/host_serve_table.md >>"$out"
echo "wrote $out"
