#!/usr/bin/env bash
# The replicated arrangement against one booster (issue 27), on one engine directory:
#   one booster   `rocket-engine launch`
#   replicated    `rocket-engine front --replicas N`: N full engines, one per GPU (CUDA_VISIBLE_DEVICES)
# each measured alike, the tables appended to RESULTS.md with the command, commit and machine:
#   parity        PARITY_PROMPTS greedy prompts, one at a time (each decodes alone), through each
#                 server: the same text from both, prompt for prompt (decode_load.py --parity)
#   throughput    bench/decode_load.py at CONCURRENCY streams (distinct prompts, MAX_TOKENS each,
#                 ignore_eos), aggregate and per-stream tok/s, TTFT and inter-token latency
#   agents        bench/serve.sh (serve_agents.py) at AGENTS clients: tok/s and prefix-cache hits, the
#                 front routing each session to the replica that holds its prefix
#   bash bench/replicated.sh ENGINE_DIR RESULTS.md [N]
# On the GPU machine (two GPUs or more): tools/device/h200_engine.sh step replicated_a3b_nvfp4. On host
# boosters, small (the replicas share the cores):
#   CONCURRENCY=1,4 AGENTS=4 MAX_TOKENS=16 PARITY_PROMPTS=3 bash bench/replicated.sh build/e2e/engines/tiny-bf16 /tmp/r.md
# Only bash and python3. Exit 1 when a server fails, a request errs or parity differs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
engine=${1:?usage: bash bench/replicated.sh ENGINE_DIR RESULTS.md [N]}
out=${2:?usage: bash bench/replicated.sh ENGINE_DIR RESULTS.md [N]}
n=${3:-2}
conc=${CONCURRENCY:-1,16,32,64}
agents=${AGENTS:-16,64}
max_tokens=${MAX_TOKENS:-128}
parity_prompts=${PARITY_PROMPTS:-8}
[ -x "$engine/bin/rocket-engine" ] || { echo "no engine binary at $engine/bin/rocket-engine"; exit 1; }
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill $server 2>/dev/null; wait 2>/dev/null || true' EXIT

# serve NAME CMD...: `rocket-engine CMD` on a free port, healthy; sets $port and $server.
serve() {
  local name=$1
  shift
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$engine/bin/rocket-engine" "$@" --port "$port" --queue 256 >"$work/$name.log" 2>&1 &
  server=$!
  python3 bench/wait_healthy.py "$port" "$server" || { tail -30 "$work/$name.log"; exit 1; }
}
stop() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=""
}

rc=0
for arm in one front; do
  if [ $arm = one ]; then serve one launch; label="one booster"; else serve front front --replicas "$n"; label="replicated x$n"; fi
  python3 bench/decode_load.py --base "http://127.0.0.1:$port" --parity "$parity_prompts" --max-tokens 32 \
    --parity-out "$work/parity_$arm.jsonl" || rc=1
  python3 bench/decode_load.py --base "http://127.0.0.1:$port" --concurrency "$conc" --max-tokens "$max_tokens" \
    --markdown "$work/throughput.md" --label "$label" || rc=1
  [ $arm = front ] && python3 - "$port" >"$work/routed.txt" <<'PY'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
c.request("GET", "/metrics")
print(", ".join(l for l in c.getresponse().read().decode().splitlines() if l.startswith("rocket_front_routed_total{")))
PY
  stop
done
if cmp -s "$work/parity_one.jsonl" "$work/parity_front.jsonl"; then
  parity="parity: the same greedy text for all $parity_prompts prompts (32 tokens each) from one booster and from the front"
else
  parity="parity: DIFFERS; one booster vs front, line by line: $(diff "$work/parity_one.jsonl" "$work/parity_front.jsonl" | head -c 600)"
  rc=1
fi
echo "$parity"

SERVE_CMD=launch bash bench/serve.sh "$engine" "$work/agents.md" --concurrency "$agents" || rc=1
SERVE_CMD="front --replicas $n" bash bench/serve.sh "$engine" "$work/agents.md" --concurrency "$agents" || rc=1

commit=$(cat "$engine/../COMMIT" 2>/dev/null || cat "${CARRY:-.carry/h200}/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo '?')
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs || true)
{
  echo "## Replicated x$n against one booster: $(basename "$engine"), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "commit $commit; machine: $machine${gpus:+, GPUs: $gpus}"
  echo "command: CONCURRENCY=$conc AGENTS=$agents MAX_TOKENS=$max_tokens PARITY_PROMPTS=$parity_prompts bash bench/replicated.sh $engine RESULTS.md $n"
  echo
  echo "$parity"
  echo
  echo "Decode throughput (bench/decode_load.py: distinct prompts, $max_tokens tokens each with ignore_eos, greedy):"
  echo
  cat "$work/throughput.md"
  echo
  echo "The front's routing during the throughput runs: $(cat "$work/routed.txt")"
  echo
  cat "$work/agents.md"
} >>"$out"
echo "appended to $out"
exit $rc
