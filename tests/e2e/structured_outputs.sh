#!/usr/bin/env bash
# Structured outputs on the tiny bf16 host engine through the official `openai` npm client: both
# response_format kinds, whole and streamed, the 400 for a schema outside the subset, and the ajv
# oracle (tests/e2e/structured_outputs.mjs says what each checks).
#   structured_outputs.sh ROCKET WORK [ORACLE_GENERATIONS]
set -uo pipefail
rocket=$1 work=$2/structured_outputs generations=${3:-160}
engine=$2/engines/tiny-bf16
here=$(cd "$(dirname "$0")" && pwd)
. "$here/serve_lib.sh"
rm -rf "$work"; mkdir -p "$work"
port=$(free_port)
base=http://127.0.0.1:$port

"$rocket" serve "$engine" --host 127.0.0.1 --port "$port" --queue 64 >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
wait_healthy "$base" $server "$work/server.log"

node "$here/structured_outputs.mjs" "$base" tiny-bf16 "$here/schema_corpus.json" "$generations"
rc=$?
kill -0 $server 2>/dev/null || { echo "FAIL the server died"; rc=1; }
((rc == 0)) || { echo "--- server log (tail)"; tail -50 "$work/server.log"; }
exit $rc
