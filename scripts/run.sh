#!/usr/bin/env bash
# The main job on the embedded default fuel: build the host engine of the trained english fuel
# (fuels/english: a small qwen3_5_moe that writes English, with its MTP layer drafting two tokens a
# step; the HF golden token for static fire), generate, then launch the OpenAI-compatible server and
# ask it for a chat completion, streamed.
#   bash scripts/run.sh ["prompt text"]
# Builds only what it runs: the `rocket` CLI here, and the engine `rocket build` compiles for the
# fuel; the tests and GPU checks are scripts/test.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
step() { echo "[run $(($(date +%s) - t0)) s] $*"; }
step "setup: packages, npm, configure, build the rocket CLI"
bash scripts/setup.sh rocket
prompt=${1:-"The quick brown fox"}
mkdir -p out
step "build the english fuel's host engine: plan, blob, engine.h, compile"
# Always rebuilt: an engine left by an older checkout holds that checkout's plan format and binary.
build/rocket build fuels/english --booster host --out out/engines/english --golden tests/golden/english_bf16.json \
  --draft 2 --force
build/rocket inspect out/engines/english | head -14
step "generate"
build/rocket generate out/engines/english --prompt "$prompt" --max-tokens 48

step "launch: countdown, then the OpenAI-compatible server"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
build/rocket launch out/engines/english --port "$port" 2>out/launch.log &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT  # the killed server's status is not the job's
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
  kill -0 $server 2>/dev/null || { cat out/launch.log; exit 1; }
  sleep 0.2
done
grep '\[countdown\]' out/launch.log
step "POST /v1/chat/completions (streamed):"
body=$(python3 -c 'import json, sys; print(json.dumps({"model": "english", "messages": [{"role": "user", "content": sys.argv[1]}],
  "max_tokens": 48, "stream": True, "stream_options": {"include_usage": True}}))' "$prompt")
curl -sN "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' -d "$body"
