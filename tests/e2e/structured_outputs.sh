#!/usr/bin/env bash
# Structured outputs on the tiny bf16 host engine through the official `openai` npm client: both
# response_format kinds, whole and streamed, the 400 for a schema outside the subset, and the ajv
# oracle (tests/e2e/structured_outputs.mjs says what each checks).
#   structured_outputs.sh ROCKET WORK [ORACLE_GENERATIONS]
set -uo pipefail
rocket=$1 work=$2/structured_outputs generations=${3:-160}
engine=$2/engines/tiny-bf16
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port

"$rocket" serve "$engine" --host 127.0.0.1 --port "$port" --queue 64 >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 1 600); do
  curl -sf "$base/health" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "FAIL server exited:"; cat "$work/server.log"; exit 1; }
  sleep 0.1
done

node "$here/structured_outputs.mjs" "$base" tiny-bf16 "$here/schema_corpus.json" "$generations"
rc=$?
kill -0 $server 2>/dev/null || { echo "FAIL the server died"; rc=1; }
((rc == 0)) || { echo "--- server log (tail)"; tail -50 "$work/server.log"; }
exit $rc
